// gnio-run's command line: what a user may ask for (Options), the usage and --help text, and the
// parser. Separate so that everything a user types is decided in one place, and the job
// environment and the launcher see only the decided Options.
#pragma once

#include <string>
#include <vector>

namespace gnio::run {

/// Everything the command line and GNIO_RUN_PREFIX decide.
struct Options {
  int ranks = 0;            ///< -n: number of ranks to start
  int nodes = 0;            ///< --nodes: simulated nodes; 0 = not given (one real node)
  double timeout = 0;       ///< --timeout seconds; 0 = no limit
  double grace = 5;         ///< --grace: seconds between SIGTERM and SIGKILL
  bool prefix = true;       ///< prefix rank output with "[r] " (--no-prefix / GNIO_RUN_PREFIX=0)
  bool bind_cores = false;  ///< --bind cores: each rank on its own share of the CPUs
  std::vector<std::string> command;  ///< PROG and its arguments
};

/// Thrown for a bad command line; main() prints it and exits 2.
struct UsageError {
  std::string message;
};

constexpr const char* kUsage =
    "Usage: gnio-run -n N [--nodes K] [--bind none|cores] [--timeout S] [--grace S] [--no-prefix] "
    "[--] PROG [ARGS...]\n";

/// The --help text.
void print_help();

/// What the command line asked for besides running a job.
enum class Action { Run, Help, Version };

/// Parses argv into `opt` (with CLI11). Options end at "--" or at the first word that is not an
/// option, so PROG's own options are never taken for gnio-run's: PROG and its arguments are
/// passed on exactly as given. Throws UsageError.
Action parse_args(int argc, char** argv, Options* opt);

}  // namespace gnio::run
