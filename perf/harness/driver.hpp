// The benchmark driver shared by gnio-perf and nvshmem-perf: subcommands, the options every
// subcommand takes (nccl-tests style), and their parsing. The command line is one CLI11 App: the
// driver adds the common options, the subcommand its own (add_options fills an OptionList with
// harness/cli_options.hpp's helpers), and the help lists both. CLI11 itself is in driver.cpp
// only: its header costs seconds per file that includes it.
//
//   PROGRAM SUBCOMMAND [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--json FILE]
//                      [--quick] [subcommand options...]
//
// A subcommand is a source file that defines a Subcommand (make_subcommand) and registers it with
// a SubcommandRegistrar at namespace scope, beside a plain C++ file that adds its options;
// adding them to the program's sources adds the subcommand (gnio-perf's `msg` is msg_gnio.cpp
// and msg_gnio_options.cpp). Registrars must live in the executable's own sources, not in a
// static library, or the linker drops them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gnio::perf {

struct OptionList;  // cli_options.hpp

/// Exit status for a bad command line (as gnio-run).
inline constexpr int kExitUsage = 2;
/// Exit status when a data check found wrong bytes.
inline constexpr int kExitWrongData = 1;
/// Exit status when the run failed (a gnio or CUDA error, a timeout, a peer that died).
inline constexpr int kExitFailure = 3;

/// The options every subcommand takes. Unset values are filled by the subcommand, which knows
/// the backend's sensible defaults (a GPU moves a GiB in milliseconds, the host backend does not).
struct CommonOptions {
  std::optional<std::uint64_t> min_bytes;  ///< -b
  std::optional<std::uint64_t> max_bytes;  ///< -e
  std::optional<std::uint64_t> factor;     ///< -f: multiply the size by this each step (>= 2)
  std::optional<std::uint32_t> iters;      ///< -n: iterations per timed launch (small messages)
  std::optional<std::uint32_t> warmup;     ///< -w: iterations of the untimed warm-up launch
  std::string json_path;                   ///< --json: write every row and metadata here
  bool quick = false;                      ///< --quick: a short run (few sizes and iterations)
  std::string program;                     ///< argv[0]'s base name
  std::string command_line;                ///< the whole command line, for the JSON metadata
};

/// Thrown for a bad command line; main prints the message and a usage hint and exits 2.
struct UsageError {
  std::string message;
};

/// Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024), optionally
/// followed by "i" and/or "B" ("64K", "1MiB", "2G"). Throws UsageError naming `what`.
std::uint64_t parse_size(const std::string& text, const char* what);
/// Parses a non-negative decimal integer no larger than `max`. Throws UsageError naming `what`.
std::uint64_t parse_count(const std::string& text, const char* what, std::uint64_t max);
/// A byte count for humans: "8", "4K", "1M", "1G" when exact, else the plain number.
std::string format_size(std::uint64_t bytes);
/// The sizes of a sweep from `lo` to at most `hi`, multiplying by `factor` (>= 2) each step.
std::vector<std::uint64_t> size_steps(std::uint64_t lo, std::uint64_t hi, std::uint64_t factor);

/// One subcommand of a benchmark program.
struct Subcommand {
  const char* name;     ///< the word after the program name ("rma")
  const char* summary;  ///< one line for the program's help
  /// Adds the subcommand's own options (and the notes of its help) to the command line; what
  /// they parse is kept for `run`. Their callbacks throw UsageError for a bad value.
  std::function<void(OptionList& list)> add_options;
  /// Runs with the parsed options; returns the exit status. Throws UsageError for a bad command
  /// line and gnio::Error (or std::exception) for failures.
  std::function<int(CommonOptions& common)> run;
};

/// A subcommand whose options are an `Options` that `add_options` fills and `run` reads (an
/// options header declares both, so that a source compiled by nvcc can register it).
template <class Options>
Subcommand make_subcommand(const char* name, const char* summary,
                           void (*add_options)(OptionList&, Options&),
                           int (*run)(CommonOptions&, const Options&)) {
  auto opts = std::make_shared<Options>();
  return {name, summary, [opts, add_options](OptionList& list) { add_options(list, *opts); },
          [opts, run](CommonOptions& common) { return run(common, *opts); }};
}

/// Registers a subcommand at static initialisation (define one at namespace scope).
struct SubcommandRegistrar {
  explicit SubcommandRegistrar(Subcommand s);
};

/// The program's main: picks the subcommand, runs it, turns exceptions into messages and exit
/// statuses. `description` is the first line of the help text.
int driver_main(int argc, char** argv, const char* description);

}  // namespace gnio::perf
