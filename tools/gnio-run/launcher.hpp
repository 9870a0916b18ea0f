// The launcher: one job from its first fork to gnio-run's exit status. Launcher spawns the ranks
// (rank_spawn.cpp) and supervises them (launcher.cpp): one poll() loop over their pipes and a
// signalfd that stops the job on the first failure, a signal or the timeout. Rank and StopReason
// are its bookkeeping. Separate from main() so that the tool's entry point only parses and runs.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "deadline.hpp"
#include "job_environment.hpp"
#include "output_stream.hpp"

namespace gnio::run {

/// One started rank.
struct Rank {
  int index = 0;             ///< rank number
  pid_t pid = -1;            ///< process id, also its process group id
  bool running = false;      ///< started and not yet reaped
  bool exec_failed = false;  ///< exec() failed; reported together with the other ranks
  int exec_errno = 0;        ///< errno of the failed exec
  int status = 0;            ///< wait status once reaped
  OutputStream out;          ///< its stdout pipe
  OutputStream err;          ///< its stderr pipe
};

/// Why the job is being stopped; the first reason decides the exit status.
enum class StopReason { None, RankFailed, Timeout, Signal, ExecFailed };

/// Runs one job: spawns the ranks, pumps their output, watches signals, exits, deadlines.
class Launcher {
 public:
  explicit Launcher(const Options& opt) : opt_(opt), env_(opt) {}

  /// Runs the job to its end and returns gnio-run's exit status.
  int run();

 private:
  // --- setup (launcher.cpp) ----------------------------------------------------------------------

  /// Blocks the forwarded signals and SIGCHLD and reads them through a signalfd, so the poll loop
  /// sees them in order with the pipes. SIGPIPE is blocked too (a closed stdout gives EPIPE).
  /// Signals that were ignored when gnio-run started (nohup, background jobs) stay ignored.
  void setup_signals();

  /// Raises the soft limit on open files when 2 pipes per rank need it; ranks get the original.
  void raise_fd_limit();

  /// Prints a system error of gnio-run itself, stops any started ranks at once, exits 125.
  [[noreturn]] void fatal_errno(const char* what);

  // --- spawning (rank_spawn.cpp) -----------------------------------------------------------------

  /// Starts every rank. Exec failures are collected and reported by report_exec_failures().
  void spawn_all();

  /// --bind cores: the CPUs of each of `n` ranks, split from those this process may use: equal,
  /// disjoint, consecutive shares while there are at least `n`; one each, round robin, beyond.
  std::vector<cpu_set_t> cpu_shares(int n);

  /// fork + exec of one rank with its pipes, process group and parent-death signal, on the CPUs
  /// `cpus` when given (--bind). Waits until the exec succeeded or failed (an O_CLOEXEC status
  /// pipe carries exec's errno back).
  void spawn(Rank& r, char** argv, char** envp, int stdin_fd, const cpu_set_t* cpus);

  /// A non-blocking read end for the poll loop.
  OutputStream make_stream(int fd, int target, int rank);

  /// One line per distinct exec error, naming the ranks it hit; then stops the job with 127/126.
  void report_exec_failures();

  // --- signals to ranks (launcher.cpp) -----------------------------------------------------------

  /// Sends `sig` to the rank's process group (its children too), or to the rank alone if it left
  /// the group.
  void signal_rank(const Rank& r, int sig);

  /// Number of ranks not yet reaped.
  std::size_t running_count() const;

  /// Starts stopping the job: records the first reason and exit status, sends `sig` to every
  /// running rank, and arms the grace deadline after which SIGKILL follows. Later calls keep the
  /// first reason and deadline but still deliver their signal.
  void begin_stop(StopReason reason, int exit_code, int sig);

  /// Sends SIGKILL to every running rank (once) and arms the deadline for their disappearance.
  void kill_all(const char* why);

  /// Handles one signal received by gnio-run.
  void on_signal(int sig);

  /// Reaps every exited rank; the first failure stops the others.
  void reap();

  /// The --timeout expired: names the running ranks and stops them.
  void on_timeout();

  // --- the loop (launcher.cpp) -------------------------------------------------------------------

  /// Polls pipes and the signalfd until every rank is reaped and its output written, handling
  /// the timeout, grace and kill deadlines in between.
  void loop();

  /// Gives up waiting on the ranks' pipes: writes what each holds now and closes them (a leftover
  /// child of a rank, or a rank stuck after SIGKILL, may keep them open).
  void drain_and_close_all();

  /// Handles every signal queued on the signalfd.
  void read_signals();

  const Options& opt_;
  JobEnvironment env_;
  std::vector<Rank> ranks_;
  int signal_fd_ = -1;
  sigset_t original_mask_{};
  rlimit original_nofile_{};
  bool restore_nofile_ = false;

  StopReason stop_reason_ = StopReason::None;
  int exit_code_ = 0;          ///< decided by the first stop reason; 0 when none
  bool stopping_ = false;      ///< SIGTERM (or a forwarded signal) was sent
  int stop_signal_ = SIGTERM;  ///< the signal that began the stop, for messages
  bool killed_ = false;        ///< SIGKILL was sent
  Deadline grace_deadline_;    ///< SIGKILL after this
  Deadline kill_deadline_;     ///< give up on unkillable ranks after this
  std::optional<Deadline::Clock::time_point> last_interrupt_;  ///< time of the last SIGINT
};

}  // namespace gnio::run
