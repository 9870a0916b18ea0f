// gnio-run's exit statuses: its contract with the scripts and CI jobs that run it (--help lists
// them). Separate so that the command line, the job environment and the launcher, which each can
// end the tool, give the same status for the same cause.
#pragma once

#include <sys/wait.h>

namespace gnio::run {

/// Exit status for bad command-line arguments.
constexpr int kExitUsage = 2;
/// Exit status when --timeout expires (as coreutils timeout(1)).
constexpr int kExitTimeout = 124;
/// Exit status when gnio-run itself fails (fork, pipe, ...), as timeout(1) and env(1).
constexpr int kExitInternal = 125;
/// Exit status when PROG exists but cannot be executed (permission, format).
constexpr int kExitCannotExecute = 126;
/// Exit status when PROG is not found.
constexpr int kExitNotFound = 127;

/// The exit status gnio-run reports for a rank's wait status: its exit code, or 128 + signal.
inline int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInternal;
}

}  // namespace gnio::run
