#include "driver.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>

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
  std::fprintf(out, "%s: %s\n\nusage: %s SUBCOMMAND [options]\n\nsubcommands:\n", program.c_str(),
               description, program.c_str());
  for (const Subcommand& s : registry()) std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
  std::fprintf(out, "\nRun it with 2 ranks: gnio-run -n 2 -- %s SUBCOMMAND [options]\n\n",
               program.c_str());
  print_common_usage(out);
  for (const Subcommand& s : registry()) {
    std::fprintf(out, "\n%s options:\n", s.name);
    s.usage(out);
  }
}

}  // namespace

SubcommandRegistrar::SubcommandRegistrar(const Subcommand& s) {
  registry().push_back(s);
}

std::string ArgReader::next() {
  pending_value_.reset();
  std::string arg = args_[pos_++];
  if (arg.rfind("--", 0) == 0) {
    const std::size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      pending_value_ = arg.substr(eq + 1);
      arg.resize(eq);
    }
  } else if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-') {
    // "-b8": a short option glued to its value.
    pending_value_ = arg.substr(2);
    arg.resize(2);
  }
  return arg;
}

std::string ArgReader::value(const std::string& option) {
  if (pending_value_) {
    std::string v = *pending_value_;
    pending_value_.reset();
    return v;
  }
  if (pos_ >= args_.size()) throw UsageError{"option " + option + " needs a value"};
  return args_[pos_++];
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

bool parse_common_option(const std::string& arg, ArgReader& reader, CommonOptions& opts) {
  if (arg == "-b" || arg == "--minbytes") {
    opts.min_bytes = parse_size(reader.value(arg), "-b (smallest message)");
  } else if (arg == "-e" || arg == "--maxbytes") {
    opts.max_bytes = parse_size(reader.value(arg), "-e (largest message)");
  } else if (arg == "-f" || arg == "--stepfactor") {
    opts.factor = parse_count(reader.value(arg), "-f (size factor)", 1u << 20);
    if (*opts.factor < 2) throw UsageError{"-f (size factor) must be at least 2"};
  } else if (arg == "-n" || arg == "--iters") {
    opts.iters =
        static_cast<std::uint32_t>(parse_count(reader.value(arg), "-n (iterations)", 1u << 30));
    if (*opts.iters == 0) throw UsageError{"-n (iterations) must be at least 1"};
  } else if (arg == "-w" || arg == "--warmup_iters" || arg == "--warmup") {
    opts.warmup = static_cast<std::uint32_t>(
        parse_count(reader.value(arg), "-w (warm-up iterations)", 1u << 30));
  } else if (arg == "--json") {
    opts.json_path = reader.value(arg);
    if (opts.json_path.empty()) throw UsageError{"--json needs a file name"};
  } else if (arg == "--quick") {
    opts.quick = true;
  } else {
    return false;
  }
  return true;
}

void print_common_usage(std::FILE* out) {
  std::fprintf(out,
               "common options:\n"
               "  -b SIZE        smallest message (K, M, G suffixes: powers of 1024)\n"
               "  -e SIZE        largest message\n"
               "  -f FACTOR      multiply the size by FACTOR from one step to the next (>= 2)\n"
               "  -n ITERS       operations per timed launch for small messages; large ones use\n"
               "                 fewer (see --help of the subcommand)\n"
               "  -w WARMUP      operations of the untimed warm-up launch before each size\n"
               "  --json FILE    also write every row and the run's metadata as JSON (rank 0)\n"
               "  --quick        a short run: few sizes, few iterations (README quick start)\n"
               "  -h, --help     this help\n");
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
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: %s %s [options]\n%s\n\n", common.program.c_str(), sub->name,
                  sub->summary);
      print_common_usage(stdout);
      std::printf("\n%s options:\n", sub->name);
      sub->usage(stdout);
      return 0;
    }
  }
  try {
    return sub->run(common, argc, argv, 2);
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
