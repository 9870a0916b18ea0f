// Runs gnio-run as a child of a one-process test and captures what it prints, for tests that must
// see a whole job from outside: its exit status, the launcher's messages, every rank's lines
// (fault scenarios where one rank dies on purpose, which a plain multi-rank test cannot survive).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern char** environ;

namespace gnio_test {

using Clock = std::chrono::steady_clock;

/// Seconds since `start`.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// One run of gnio-run with its stdout and stderr captured. The destructor kills a run that was
/// not finished, so no test leaves processes behind.
class Job {
 public:
  /// Starts `gnio_run args...` with the test's environment less the variables gnio-run reads or
  /// sets, plus `env` ("NAME=value", replacing an inherited value); stdin is /dev/null.
  Job(const std::string& gnio_run, const std::vector<std::string>& args,
      const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv_strings = {gnio_run};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings;
    auto set_here = [&](const std::string& name) {
      for (const std::string& v : env)
        if (v.compare(0, name.size() + 1, name + "=") == 0) return true;
      return false;
    };
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      if (name == "GNIO_NODE_ID" || name == "GNIO_JOB_TOKEN" || name == "GNIO_RUN_PREFIX" ||
          name == "RANK" || name == "WORLD_SIZE" || name == "MASTER_PORT" || set_here(name))
        continue;
      env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> argv, envp;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
    start_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, STDIN_FILENO);
      // gnio-run leaves alone signals that were ignored when it started (as in a background job
      // of a script); the tests want its normal handling whatever started ctest.
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(111);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  ~Job() {
    if (!finished_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }

  /// Reads output until `done()` holds or `seconds` pass. Returns whether it held.
  bool wait_until(const std::function<bool()>& done, double seconds) {
    auto start = Clock::now();
    while (!done()) {
      if (seconds_since(start) > seconds || (out_fd_ < 0 && err_fd_ < 0)) return done();
      pump(50);
    }
    return true;
  }

  /// Sends a signal to gnio-run itself.
  void signal(int sig) { ::kill(pid_, sig); }

  /// Reads until gnio-run exits and closes its output, at most `seconds`; returns its exit status
  /// (128 + signal if it was killed). Fails the test and kills it when the bound passes.
  int finish(double seconds) {
    auto start = Clock::now();
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (seconds_since(start) > seconds) {
        ADD_FAILURE() << "gnio-run did not finish within " << seconds << " s\nstdout:\n"
                      << out << "\nstderr:\n"
                      << err;
        ::kill(pid_, SIGKILL);
        break;
      }
      pump(100);
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    finished_ = true;
    elapsed_ = seconds_since(start_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  /// Seconds from the start to the end of finish().
  double elapsed() const { return elapsed_; }

  std::string out;  ///< gnio-run's stdout so far
  std::string err;  ///< gnio-run's stderr so far

 private:
  /// One poll round over both pipes.
  void pump(int timeout_ms) {
    pollfd fds[2];
    int n = 0;
    int* owners[2];
    std::string* sinks[2];
    if (out_fd_ >= 0) fds[n] = {out_fd_, POLLIN, 0}, owners[n] = &out_fd_, sinks[n++] = &out;
    if (err_fd_ >= 0) fds[n] = {err_fd_, POLLIN, 0}, owners[n] = &err_fd_, sinks[n++] = &err;
    if (n == 0 || ::poll(fds, static_cast<nfds_t>(n), timeout_ms) <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      char buf[65536];
      ssize_t got = ::read(*owners[i], buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(*owners[i]);
        *owners[i] = -1;
      }
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool finished_ = false;
  Clock::time_point start_;
  double elapsed_ = 0;
};

}  // namespace gnio_test
