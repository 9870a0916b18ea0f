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
#include <string>
#include <vector>

extern char** environ;

namespace gnio_test {

/// One run of gnio-run with its stdout and stderr captured. The destructor kills a run that was
/// not finished, so no test leaves processes behind.
class Job {
 public:
  /// Starts `gnio_run args...` with the test's environment less the variables gnio-run sets,
  /// plus `env` ("NAME=value").
  Job(const std::string& gnio_run, const std::vector<std::string>& args,
      const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv_strings = {gnio_run};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      if (name == "GNIO_NODE_ID" || name == "GNIO_JOB_TOKEN" || name == "RANK" ||
          name == "WORLD_SIZE" || name == "MASTER_PORT")
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
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      // gnio-run leaves alone signals that were ignored when it started; the tests want its
      // normal handling whatever started ctest.
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

  /// Reads until gnio-run exits and closes its output, at most `seconds`; returns its exit status
  /// (128 + signal if it was killed). Fails the test and kills it when the bound passes.
  int finish(double seconds) {
    auto start = std::chrono::steady_clock::now();
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          seconds) {
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
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string out;  ///< gnio-run's stdout so far
  std::string err;  ///< gnio-run's stderr so far

 private:
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
};

}  // namespace gnio_test
