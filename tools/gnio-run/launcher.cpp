#include "launcher.hpp"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "exit_status.hpp"
#include "gnio/log.hpp"
#include "message_words.hpp"
#include "tool_output.hpp"

namespace gnio::run {
namespace {

/// Two SIGINTs closer than this escalate to SIGKILL.
constexpr double kDoubleInterruptSeconds = 2.0;
/// How long to wait for ranks to disappear after SIGKILL before giving up on them (a process in
/// uninterruptible sleep, e.g. inside a driver, can take a while).
constexpr double kKillWaitSeconds = 10.0;
/// After the last rank exited, how long to keep reading pipes that a leftover grandchild still
/// holds open.
constexpr double kDrainSeconds = 1.0;

}  // namespace

int Launcher::run() {
  setup_signals();
  raise_fd_limit();
  spawn_all();
  report_exec_failures();
  loop();
  return exit_code_;
}

void Launcher::setup_signals() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&handled, sig);
  }
  sigset_t blocked = handled;
  sigaddset(&blocked, SIGPIPE);
  ::sigprocmask(SIG_BLOCK, &blocked, &original_mask_);
  signal_fd_ = ::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) fatal_errno("signalfd");
}

void Launcher::raise_fd_limit() {
  ::getrlimit(RLIMIT_NOFILE, &original_nofile_);
  rlim_t need = static_cast<rlim_t>(opt_.ranks) * 2 + 64;
  if (original_nofile_.rlim_cur != RLIM_INFINITY && original_nofile_.rlim_cur < need) {
    rlimit raised = original_nofile_;
    raised.rlim_cur = original_nofile_.rlim_max == RLIM_INFINITY
                          ? need
                          : std::min<rlim_t>(need, original_nofile_.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &raised);
    restore_nofile_ = true;
  }
}

void Launcher::fatal_errno(const char* what) {
  int err = errno;
  say("%s failed: %s", what, std::strerror(err));
  for (Rank& r : ranks_)
    if (r.running) signal_rank(r, SIGKILL);
  std::exit(kExitInternal);
}

void Launcher::signal_rank(const Rank& r, int sig) {
  if (::killpg(r.pid, sig) != 0) ::kill(r.pid, sig);
}

std::size_t Launcher::running_count() const {
  std::size_t n = 0;
  for (const Rank& r : ranks_) n += r.running ? 1 : 0;
  return n;
}

void Launcher::begin_stop(StopReason reason, int exit_code, int sig) {
  if (stop_reason_ == StopReason::None) {
    stop_reason_ = reason;
    exit_code_ = exit_code;
    stop_signal_ = sig;
    grace_deadline_ = Deadline::after(opt_.grace > 0 ? opt_.grace : 1e-9);
    stopping_ = true;
  }
  for (Rank& r : ranks_)
    if (r.running) signal_rank(r, sig);
}

void Launcher::kill_all(const char* why) {
  if (killed_) return;
  killed_ = true;
  std::vector<std::string> names;
  for (Rank& r : ranks_)
    if (r.running) names.push_back(strf("rank %d (pid %d)", r.index, static_cast<int>(r.pid)));
  if (!names.empty()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    say("%s; sending SIGKILL to %s", why, list.c_str());
  }
  for (Rank& r : ranks_)
    if (r.running) signal_rank(r, SIGKILL);
  kill_deadline_ = Deadline::after(kKillWaitSeconds);
}

void Launcher::on_signal(int sig) {
  if (sig == SIGCHLD) {
    reap();
    return;
  }
  const char* name = signal_abbrev(sig);
  if (sig == SIGINT) {
    bool repeated =
        last_interrupt_ &&
        std::chrono::duration<double>(Deadline::Clock::now() - *last_interrupt_).count() <
            kDoubleInterruptSeconds;
    last_interrupt_ = Deadline::Clock::now();
    if (repeated) {
      if (stop_reason_ == StopReason::None) begin_stop(StopReason::Signal, 128 + sig, sig);
      kill_all("second SIGINT within 2 s");
      return;
    }
  }
  if (running_count() > 0 && !killed_)
    say("received SIG%s; forwarding it to %zu running %s (SIGKILL after %s%s)", name,
        running_count(), ranks_word(running_count()), seconds_text(opt_.grace).c_str(),
        sig == SIGINT ? ", or at once on a second SIGINT" : "");
  begin_stop(StopReason::Signal, 128 + sig, sig);
}

void Launcher::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    Rank* r = nullptr;
    for (Rank& candidate : ranks_)
      if (candidate.pid == pid && candidate.running) r = &candidate;
    if (!r) continue;
    r->running = false;
    r->status = status;
    // Its last output is already in the pipes: print it before any message about its death.
    r->out.drain_available();
    r->err.drain_available();
    GNIO_INFO(Tool, "gnio-run: rank %d (pid %d) %s", r->index, static_cast<int>(pid),
              describe_status(status).c_str());
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && !r->exec_failed && stop_reason_ == StopReason::None) {
      std::size_t others = running_count();
      if (others > 0)
        say("rank %d (pid %d) %s; stopping the other %zu %s", r->index, static_cast<int>(pid),
            describe_status(status).c_str(), others, ranks_word(others));
      else
        say("rank %d (pid %d) %s", r->index, static_cast<int>(pid),
            describe_status(status).c_str());
      begin_stop(StopReason::RankFailed, exit_code_of(status), SIGTERM);
    }
  }
}

void Launcher::on_timeout() {
  std::string list;
  std::size_t n = 0;
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    list += strf("%srank %d (pid %d)", list.empty() ? "" : ", ", r.index, static_cast<int>(r.pid));
    ++n;
  }
  say("timeout: the job ran longer than %s; %zu of %d ranks still running: %s; sending SIGTERM "
      "(SIGKILL after %s)",
      seconds_text(opt_.timeout).c_str(), n, opt_.ranks, list.c_str(),
      seconds_text(opt_.grace).c_str());
  begin_stop(StopReason::Timeout, kExitTimeout, SIGTERM);
}

void Launcher::drain_and_close_all() {
  for (Rank& r : ranks_) {
    r.out.drain_available();
    r.err.drain_available();
    r.out.close_and_flush();
    r.err.close_and_flush();
  }
}

void Launcher::loop() {
  Deadline job_deadline = Deadline::after(opt_.timeout);
  std::optional<Deadline> drain_deadline;
  std::vector<pollfd> fds;
  std::vector<OutputStream*> streams;
  for (;;) {
    if (running_count() == 0) {
      if (!drain_deadline) drain_deadline = Deadline::after(kDrainSeconds);
      bool open = false;
      for (Rank& r : ranks_) open = open || r.out.fd >= 0 || r.err.fd >= 0;
      if (!open) return;
      if (drain_deadline->expired()) {
        // A leftover child of a rank still holds a pipe: take what is there and stop waiting.
        drain_and_close_all();
        return;
      }
    }
    if (!stopping_ && job_deadline.expired()) on_timeout();
    if (stopping_ && !killed_ && grace_deadline_.expired())
      kill_all(strf("still running %s after SIG%s", seconds_text(opt_.grace).c_str(),
                    signal_abbrev(stop_signal_))
                   .c_str());
    if (killed_ && running_count() > 0 && kill_deadline_.expired()) {
      for (const Rank& r : ranks_)
        if (r.running)
          say("rank %d (pid %d) has not exited %s after SIGKILL (stuck in the kernel?); giving "
              "up on it",
              r.index, static_cast<int>(r.pid), seconds_text(kKillWaitSeconds).c_str());
      drain_and_close_all();
      return;
    }

    fds.clear();
    streams.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    for (Rank& r : ranks_) {
      for (OutputStream* s : {&r.out, &r.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    int wait_ms = 1000;  // upper bound: deadlines are re-checked at least every second
    if (!stopping_) wait_ms = job_deadline.remaining_ms(wait_ms);
    if (stopping_ && !killed_) wait_ms = grace_deadline_.remaining_ms(wait_ms);
    if (killed_) wait_ms = kill_deadline_.remaining_ms(wait_ms);
    if (drain_deadline) wait_ms = drain_deadline->remaining_ms(wait_ms);
    int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fatal_errno("poll");
    }
    if (ready == 0) continue;
    for (std::size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) streams[i - 1]->read_some();
    if (fds[0].revents) read_signals();
  }
}

void Launcher::read_signals() {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = ::read(signal_fd_, &info, sizeof(info));
    if (n != static_cast<ssize_t>(sizeof(info))) return;
    on_signal(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace gnio::run
