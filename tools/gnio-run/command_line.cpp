#include "command_line.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "tool_output.hpp"

namespace gnio::run {
namespace {

/// Parses a positive integer option value, or throws UsageError.
int parse_count(const std::string& option, const std::string& text, int max) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < 1 || v > max)
    throw UsageError{strf("%s expects a whole number from 1 to %d, got '%s'", option.c_str(), max,
                          text.c_str())};
  return static_cast<int>(v);
}

/// Parses a non-negative number of seconds, or throws UsageError.
double parse_seconds(const std::string& option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno || !std::isfinite(v) || v < 0 || v > 1e9)
    throw UsageError{strf("%s expects a non-negative number of seconds, got '%s'", option.c_str(),
                          text.c_str())};
  return v;
}

}  // namespace

void print_help() {
  std::string text = kUsage;
  text +=
      "\n"
      "Starts N ranks of PROG on this machine with torchrun-style environment variables (RANK,\n"
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,\n"
      "MASTER_PORT) and a random GNIO_JOB_TOKEN, so that gnio's bootstrap finds its peers.\n"
      "\n"
      "Options:\n"
      "  -n, --np N      number of ranks to start (required)\n"
      "  --nodes K       split the ranks into K simulated nodes of N/K consecutive ranks, each\n"
      "                  with its own GNIO_NODE_ID, LOCAL_RANK and GROUP_RANK (forces gnio's\n"
      "                  inter-node transports on one machine); K must divide N\n"
      "  --bind MODE     none (default): the ranks run on every CPU gnio-run may use; cores:\n"
      "                  rank i runs only on the i-th of N equal, disjoint shares of those CPUs\n"
      "                  (round robin, one CPU each, when N exceeds them), as mpirun\n"
      "                  --bind-to core; for benchmarks, where the scheduler moving a rank's\n"
      "                  threads onto the CPU its peer is using costs up to half the throughput\n"
      "  --timeout S     stop the job if it runs longer than S seconds and exit 124\n"
      "                  (default 0: no limit)\n"
      "  --grace S       seconds between SIGTERM and SIGKILL when stopping ranks (default 5)\n"
      "  --no-prefix     pass the ranks' output through unchanged instead of prefixing each\n"
      "                  line with \"[rank] \" (same as GNIO_RUN_PREFIX=0)\n"
      "  -h, --help      print this help and exit\n"
      "  --version       print the version and exit\n"
      "\n"
      "When a rank exits non-zero or dies by a signal, the other ranks get SIGTERM, then SIGKILL\n"
      "after the grace period. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the ranks;\n"
      "a second SIGINT within 2 s kills them.\n"
      "\n"
      "Exit status: 0 when every rank exits 0; otherwise the first failing rank's exit code, or\n"
      "128+SIG when it died by signal SIG; 124 when --timeout expired; 128+SIG when gnio-run\n"
      "itself received signal SIG; 127 when PROG is not found, 126 when it cannot be executed;\n"
      "2 for bad arguments; 125 when gnio-run itself fails.\n";
  write_all(STDOUT_FILENO, text);
}

Action parse_args(int argc, char** argv, Options* opt) {
  constexpr int kMaxRanks = 1 << 16;
  bool have_ranks = false;
  bool no_prefix = false;
  int i = 1;
  // Returns the value of option `name` given as "--name=value", "-nVALUE" or "--name value".
  auto value = [&](const std::string& arg, const std::string& name) -> std::optional<std::string> {
    if (arg == name) {
      if (i + 1 >= argc) throw UsageError{strf("%s needs a value", name.c_str())};
      return std::string(argv[++i]);
    }
    if (name.size() > 2 && arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
    if (name.size() == 2 && arg.size() > 2 && arg.rfind(name, 0) == 0) return arg.substr(2);
    return std::nullopt;
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;
    if (arg == "-h" || arg == "--help") return Action::Help;
    if (arg == "--version") return Action::Version;
    if (arg == "--no-prefix") {
      no_prefix = true;
    } else if (auto v = value(arg, "-n")) {
      opt->ranks = parse_count("-n", *v, kMaxRanks);
      have_ranks = true;
    } else if (auto v2 = value(arg, "--np")) {
      opt->ranks = parse_count("--np", *v2, kMaxRanks);
      have_ranks = true;
    } else if (auto v3 = value(arg, "--nodes")) {
      opt->nodes = parse_count("--nodes", *v3, kMaxRanks);
    } else if (auto v4 = value(arg, "--timeout")) {
      opt->timeout = parse_seconds("--timeout", *v4);
    } else if (auto v5 = value(arg, "--grace")) {
      opt->grace = parse_seconds("--grace", *v5);
    } else if (auto v6 = value(arg, "--bind")) {
      if (*v6 != "none" && *v6 != "cores")
        throw UsageError{strf("--bind expects none or cores, got '%s'", v6->c_str())};
      opt->bind_cores = *v6 == "cores";
    } else {
      throw UsageError{strf("unknown option '%s'", arg.c_str())};
    }
  }
  for (; i < argc; ++i) opt->command.emplace_back(argv[i]);
  if (!have_ranks) throw UsageError{"missing -n N (the number of ranks to start)"};
  if (opt->command.empty()) throw UsageError{"missing the program to run after the options"};
  if (opt->nodes > 0 && opt->ranks % opt->nodes != 0)
    throw UsageError{
        strf("--nodes %d does not divide -n %d: every simulated node needs the same "
             "number of ranks",
             opt->nodes, opt->ranks)};
  // Read after the command line so that a bad GNIO_RUN_PREFIX is reported like a bad option.
  try {
    opt->prefix = !no_prefix && config_bool("GNIO_RUN_PREFIX");
  } catch (const Error& e) {
    throw UsageError{e.message()};
  }
  return Action::Run;
}

}  // namespace gnio::run
