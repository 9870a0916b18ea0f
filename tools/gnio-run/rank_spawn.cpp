// Launcher's members that start the ranks: fork and exec with their pipes, process groups, CPU
// shares (--bind cores) and environment, and the summary of execs that failed.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "exit_status.hpp"
#include "gnio/log.hpp"
#include "gnio/rank_ranges.hpp"
#include "launcher.hpp"
#include "message_words.hpp"
#include "tool_output.hpp"

namespace gnio::run {

void Launcher::spawn_all() {
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) fatal_errno("open(/dev/null)");
  // Only rank 0 may read gnio-run's stdin, and only when it is not a terminal: the ranks run in
  // their own process groups, where reading the terminal would stop them (SIGTTIN).
  bool stdin_to_rank0 = !::isatty(STDIN_FILENO) && ::fcntl(STDIN_FILENO, F_GETFD) != -1;

  std::vector<char*> argv;
  for (const std::string& a : opt_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  ranks_.resize(static_cast<std::size_t>(opt_.ranks));
  const std::vector<cpu_set_t> shares =
      opt_.bind_cores ? cpu_shares(opt_.ranks) : std::vector<cpu_set_t>{};
  for (int i = 0; i < opt_.ranks; ++i) {
    Rank& r = ranks_[static_cast<std::size_t>(i)];
    r.index = i;
    std::vector<std::string> env_strings = env_.for_rank(i);
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    spawn(r, argv.data(), envp.data(), (i == 0 && stdin_to_rank0) ? STDIN_FILENO : devnull,
          shares.empty() ? nullptr : &shares[static_cast<std::size_t>(i)]);
  }
  ::close(devnull);
}

std::vector<cpu_set_t> Launcher::cpu_shares(int n) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) fatal_errno("sched_getaffinity");
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const std::size_t m = cpus.size(), ranks = static_cast<std::size_t>(n);
  std::vector<cpu_set_t> shares(ranks);
  for (std::size_t i = 0; i < ranks; ++i) {
    CPU_ZERO(&shares[i]);
    if (ranks > m) {
      CPU_SET(cpus[i % m], &shares[i]);
      continue;
    }
    for (std::size_t k = i * m / ranks; k < (i + 1) * m / ranks; ++k) CPU_SET(cpus[k], &shares[i]);
  }
  return shares;
}

void Launcher::spawn(Rank& r, char** argv, char** envp, int stdin_fd, const cpu_set_t* cpus) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, status_pipe[2];
  if (opt_.prefix) {
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) fatal_errno("pipe");
  }
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) fatal_errno("pipe");
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) fatal_errno("fork");
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitInternal);  // gnio-run died before prctl took
    if (stdin_fd != STDIN_FILENO) ::dup2(stdin_fd, STDIN_FILENO);
    if (opt_.prefix) {
      ::dup2(out_pipe[1], STDOUT_FILENO);
      ::dup2(err_pipe[1], STDERR_FILENO);
    }
    if (restore_nofile_) ::setrlimit(RLIMIT_NOFILE, &original_nofile_);
    // A subset of what this process may use: it cannot fail but for a CPU going offline, and
    // then the rank runs where it would have without --bind.
    if (cpus) (void)::sched_setaffinity(0, sizeof(*cpus), cpus);
    ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    ::execvpe(argv[0], argv, envp);
    int err = errno;
    ssize_t ignored = ::write(status_pipe[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(err == ENOENT ? kExitNotFound : kExitCannotExecute);
  }

  // Parent. Also set the group here: whichever of parent and child runs first wins the race.
  ::setpgid(pid, pid);
  r.pid = pid;
  r.running = true;
  ::close(status_pipe[1]);
  if (opt_.prefix) {
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    r.out = make_stream(out_pipe[0], STDOUT_FILENO, r.index);
    r.err = make_stream(err_pipe[0], STDERR_FILENO, r.index);
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    r.exec_failed = true;
    r.exec_errno = child_errno;
  }
  GNIO_INFO(Tool, "gnio-run: rank %d started as pid %d%s", r.index, static_cast<int>(pid),
            r.exec_failed ? " (exec failed)" : "");
}

OutputStream Launcher::make_stream(int fd, int target, int rank) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  OutputStream s;
  s.fd = fd;
  s.target = target;
  s.prefix = "[" + std::to_string(rank) + "] ";
  return s;
}

void Launcher::report_exec_failures() {
  std::map<int, std::vector<int>> by_errno;
  for (const Rank& r : ranks_)
    if (r.exec_failed) by_errno[r.exec_errno].push_back(r.index);
  if (by_errno.empty()) return;
  const std::string& prog = opt_.command[0];
  bool not_found = false;
  for (const auto& [err, ranks] : by_errno) {
    not_found = not_found || err == ENOENT;
    const char* hint = "";
    if (err == ENOENT && prog.find('/') == std::string::npos)
      hint = " (not found in PATH)";
    else if (err == ENOENT && ::access(prog.c_str(), F_OK) == 0)
      hint = " (the file exists: is the interpreter on its #! line missing?)";
    say("cannot execute '%s' for %s %s: %s%s", prog.c_str(), ranks_word(ranks.size()),
        gnio::rank_ranges(ranks).c_str(), std::strerror(err), hint);
  }
  begin_stop(StopReason::ExecFailed, not_found ? kExitNotFound : kExitCannotExecute, SIGTERM);
}

}  // namespace gnio::run
