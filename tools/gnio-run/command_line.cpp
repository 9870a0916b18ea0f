#include "command_line.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "tool_output.hpp"

namespace gnio::run {
namespace {

constexpr int kMaxRanks = 1 << 16;

/// CLI11's help laid out as gnio-run's always was: the usage line first, then what it does, the
/// options, and the footer (what happens on failure, the exit statuses).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    return kUsage + ("\n" + app->get_description() + "\n") + make_groups(app, mode) +
           make_footer(app);
  }
};

/// A whole number of ranks or nodes, 1..kMaxRanks.
const CLI::Validator kCount(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end || errno || v < 1 || v > kMaxRanks)
        return strf("expects a whole number from 1 to %d, got '%s'", kMaxRanks, text.c_str());
      return {};
    },
    "", "count");

/// A non-negative number of seconds.
const CLI::Validator kSeconds(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || errno || !std::isfinite(v) || v < 0 || v > 1e9)
        return strf("expects a non-negative number of seconds, got '%s'", text.c_str());
      return {};
    },
    "", "seconds");

/// What the command line can set besides Options.
struct Switches {
  std::string bind = "none";
  bool no_prefix = false;
};

/// gnio-run's options, bound to `opt` and `sw`. Options end at "--" or at the first word that is
/// not an option (prefix_command): that word and everything after it are left unparsed, for PROG.
void describe(CLI::App& app, Options* opt, Switches* sw) {
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(18);
  app.prefix_command();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.description(
      "Starts N ranks of PROG on this machine with torchrun-style environment variables (RANK,\n"
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,\n"
      "MASTER_PORT) and a random GNIO_JOB_TOKEN, so that gnio's bootstrap finds its peers.");
  app.set_help_flag("-h,--help", "print this help and exit");
  app.add_option("-n,--np", opt->ranks, "number of ranks to start (required)")
      ->type_name("N")
      ->option_text("N")
      ->required()
      ->check(kCount);
  app.add_option("--nodes", opt->nodes,
                 "split the ranks into K simulated nodes of N/K consecutive ranks, each\n"
                 "with its own GNIO_NODE_ID, LOCAL_RANK and GROUP_RANK (forces gnio's\n"
                 "inter-node transports on one machine); K must divide N")
      ->type_name("K")
      ->check(kCount);
  app.add_option("--bind", sw->bind,
                 "none (default): the ranks run on every CPU gnio-run may use; cores:\n"
                 "rank i runs only on the i-th of N equal, disjoint shares of those CPUs\n"
                 "(round robin, one CPU each, when N exceeds them), as mpirun\n"
                 "--bind-to core; for benchmarks, where the scheduler moving a rank's\n"
                 "threads onto the CPU its peer is using costs up to half the throughput")
      ->type_name("MODE")
      ->check(CLI::IsMember({"none", "cores"}));
  app.add_option("--timeout", opt->timeout,
                 "stop the job if it runs longer than S seconds and exit 124\n"
                 "(default 0: no limit)")
      ->type_name("S")
      ->check(kSeconds);
  app.add_option("--grace", opt->grace,
                 "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
      ->type_name("S")
      ->check(kSeconds);
  app.add_flag("--no-prefix", sw->no_prefix,
               "pass the ranks' output through unchanged instead of prefixing each\n"
               "line with \"[rank] \" (same as GNIO_RUN_PREFIX=0)");
  app.set_version_flag("--version", "", "print the version and exit");
  app.footer(
      "\n"
      "When a rank exits non-zero or dies by a signal, the other ranks get SIGTERM, then SIGKILL\n"
      "after the grace period. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the ranks;\n"
      "a second SIGINT within 2 s kills them.\n"
      "\n"
      "Exit status: 0 when every rank exits 0; otherwise the first failing rank's exit code, or\n"
      "128+SIG when it died by signal SIG; 124 when --timeout expired; 128+SIG when gnio-run\n"
      "itself received signal SIG; 127 when PROG is not found, 126 when it cannot be executed;\n"
      "2 for bad arguments; 125 when gnio-run itself fails.");
}

}  // namespace

void print_help() {
  CLI::App app("", "gnio-run");
  Options opt;
  Switches sw;
  describe(app, &opt, &sw);
  write_all(STDOUT_FILENO, app.help());
}

Action parse_args(int argc, char** argv, Options* opt) {
  CLI::App app("", "gnio-run");
  Switches sw;
  describe(app, opt, &sw);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return Action::Help;
  } catch (const CLI::CallForVersion&) {
    return Action::Version;
  } catch (const CLI::RequiredError&) {  // -n is the one required option
    throw UsageError{"missing -n N (the number of ranks to start)"};
  } catch (const CLI::ParseError& e) {
    throw UsageError{e.what()};
  }
  // What CLI11 left unparsed: an option it does not know (an error), or "--" or PROG and
  // everything after it, untouched.
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest[0] == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest[0].size() > 1 && rest[0][0] == '-') {
    throw UsageError{strf("unknown option '%s'", rest[0].c_str())};
  }
  opt->command = std::move(rest);
  if (opt->command.empty()) throw UsageError{"missing the program to run after the options"};
  opt->bind_cores = sw.bind == "cores";
  if (opt->nodes > 0 && opt->ranks % opt->nodes != 0)
    throw UsageError{
        strf("--nodes %d does not divide -n %d: every simulated node needs the same "
             "number of ranks",
             opt->nodes, opt->ranks)};
  // Read after the command line so that a bad GNIO_RUN_PREFIX is reported like a bad option.
  try {
    opt->prefix = !sw.no_prefix && config_bool("GNIO_RUN_PREFIX");
  } catch (const Error& e) {
    throw UsageError{e.message()};
  }
  return Action::Run;
}

}  // namespace gnio::run
