#include "driver.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>

#include "cli_options.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"

namespace gnio::perf {
namespace {

std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> subcommands;
  return subcommands;
}

const Subcommand* find_subcommand(const std::string& name) {
  for (const Subcommand& s : registry())
    if (name == s.name) return &s;
  return nullptr;
}

void print_usage(std::FILE* out, const std::string& program, const char* description) {
  std::fprintf(out, "%s: %s\n\nUsage: %s SUBCOMMAND [OPTIONS]\n\nSubcommands:\n", program.c_str(),
               description, program.c_str());
  for (const Subcommand& s : registry()) std::fprintf(out, "  %-12s %s\n", s.name, s.summary);
  std::fprintf(out,
               "\nRun it with 2 ranks: gnio-run -n 2 -- %s SUBCOMMAND [OPTIONS]\n"
               "Every subcommand's options: %s SUBCOMMAND --help\n",
               program.c_str(), program.c_str());
}

/// The options every subcommand takes, parsed into `opts`.
void add_common_options(OptionList& list, CommonOptions& opts) {
  list.add(
      "-b,--minbytes",
      [&opts](const std::string& v) { opts.min_bytes = parse_size(v, "-b (smallest message)"); },
      "smallest message (K, M, G suffixes: powers of 1024)", "SIZE");
  list.add(
      "-e,--maxbytes",
      [&opts](const std::string& v) { opts.max_bytes = parse_size(v, "-e (largest message)"); },
      "largest message", "SIZE");
  add_count_option(list, "-f,--stepfactor", "-f (size factor)", opts.factor, 2, 1u << 20,
                   "multiply the size by FACTOR from one step to the next (>= 2)")
      .value_name("FACTOR");
  add_count_option(list, "-n,--iters", "-n (iterations)", opts.iters, 1, 1u << 30,
                   "operations per timed launch for small messages; large ones use\n"
                   "fewer (see the subcommand's options)")
      .value_name("ITERS");
  add_count_option(list, "-w,--warmup_iters,--warmup", "-w (warm-up iterations)", opts.warmup, 0,
                   1u << 30, "operations of the untimed warm-up launch before each size")
      .value_name("WARMUP");
  list.add(
      "--json",
      [&opts](const std::string& v) {
        if (v.empty()) throw UsageError{"--json needs a file name"};
        opts.json_path = v;
      },
      "also write every row and the run's metadata as JSON (rank 0)", "FILE");
  list.add_flag("--quick", opts.quick,
                "a short run: few sizes, few iterations (README quick start)");
}

/// Hands `list` to CLI11: an option's value goes to its `take`, a flag sets its bool.
void add_to_app(CLI::App& app, const OptionList& list) {
  for (const CommandOption& o : list.options) {
    if (o.flag)
      app.add_flag(o.flags, *o.flag, o.help);
    else
      app.add_option_function<std::string>(o.flags, o.take, o.help)->type_name(o.type_name);
  }
  if (!list.footer.empty()) app.footer(list.footer);
}

}  // namespace

SubcommandRegistrar::SubcommandRegistrar(Subcommand s) {
  registry().push_back(std::move(s));
}

std::uint64_t parse_size(const std::string& text, const char* what) {
  // The library's parser, so that -b/-e take exactly what GNIO_*_SIZE variables take.
  const std::optional<std::uint64_t> v = parse_byte_count(text);
  if (!v)
    throw UsageError{std::string(what) + " '" + text + "' is not a byte count like 8, 64K, 1M, 1G"};
  return *v;
}

std::uint64_t parse_count(const std::string& text, const char* what, std::uint64_t max) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (text.empty() || end == s || *end || errno || text[0] == '-' || v > max)
    throw UsageError{std::string(what) + " '" + text + "' is not an integer in 0.." +
                     std::to_string(max)};
  return v;
}

std::vector<std::uint64_t> size_steps(std::uint64_t lo, std::uint64_t hi, std::uint64_t factor) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = lo; s <= hi; s *= factor) {
    v.push_back(s);
    if (s > hi / factor) break;  // the next step would overflow or pass hi
  }
  return v;
}

std::string format_size(std::uint64_t bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  std::uint64_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + kUnits[u];
}

int driver_main(int argc, char** argv, const char* description) {
  CommonOptions common;
  const char* slash = std::strrchr(argv[0], '/');
  common.program = slash ? slash + 1 : argv[0];
  for (int i = 0; i < argc; ++i) {
    if (i) common.command_line += ' ';
    common.command_line += argv[i];
  }
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    print_usage(argc < 2 ? stderr : stdout, common.program, description);
    return argc < 2 ? kExitUsage : 0;
  }
  const Subcommand* sub = find_subcommand(argv[1]);
  if (!sub) {
    std::fprintf(stderr, "%s: unknown subcommand '%s'; run '%s --help' for the list\n",
                 common.program.c_str(), argv[1], common.program.c_str());
    return kExitUsage;
  }
  // One command line: the common options, then the subcommand's own (a group of the help).
  CLI::App app(std::string(sub->summary) + "\n", common.program + " " + sub->name);
  app.get_formatter()->column_width(22);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help", "this help");
  OptionList common_options, sub_options;
  add_common_options(common_options, common);
  add_to_app(app, common_options);
  app.option_defaults()->group(std::string(sub->name) + " options");
  sub->add_options(sub_options);
  add_to_app(app, sub_options);
  try {
    try {
      app.parse(argc - 1, argv + 1);  // argv[1], the subcommand, stands for the program name
    } catch (const CLI::CallForHelp&) {
      std::printf("%s", app.help().c_str());
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError{e.what()};
    }
    // Options first: a bad command line fails on every rank before any communicator exists.
    return sub->run(common);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s %s: %s (see '%s %s --help')\n", common.program.c_str(), sub->name,
                 e.message.c_str(), common.program.c_str(), sub->name);
    return kExitUsage;
  } catch (const gnio::Error& e) {
    std::fprintf(stderr, "%s %s: %s\n", common.program.c_str(), sub->name, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: error: %s\n", common.program.c_str(), sub->name, e.what());
  }
  // A failure mid-run leaves peers waiting in a barrier or a kernel. Exit without running
  // destructors: tearing down a communicator is collective and would wait for those peers, while
  // an immediate exit lets the launcher (gnio-run) see the failure and stop the whole job.
  std::fflush(nullptr);
  std::_Exit(kExitFailure);
}

}  // namespace gnio::perf
