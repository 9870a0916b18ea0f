// gnio-run: starts N ranks of a program on this machine with torchrun-style environment variables,
// prefixes their output line by line, forwards signals to them, and stops the whole job as soon
// as one rank fails (or a --timeout passes), exiting with the first failure's status.
//
// It is deliberately small: the C++ standard library, POSIX/Linux calls, and gnio's base layer
// (compiled in, see CMakeLists.txt) for the configuration table (GNIO_RUN_PREFIX, GNIO_JOB_TOKEN,
// GNIO_NODE_ID) and logging. It never touches a GPU. One thread, one poll() loop over the ranks'
// pipes and a signalfd, so huge outputs cannot deadlock and every wait is bounded by a deadline.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "gnio/log.hpp"
#include "gnio/version.hpp"

extern char** environ;

namespace gnio::run {
namespace {

/// A point in time after which one of gnio-run's waits gives up; a zero or negative span never
/// expires (--timeout 0). The tool keeps its own: it uses only gnio's public headers.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline after(double seconds) {
    Deadline d;
    d.infinite_ = seconds <= 0;
    if (!d.infinite_)
      d.at_ = Clock::now() +
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  /// Milliseconds left, clamped to [0, cap_ms]; cap_ms when it never expires.
  int remaining_ms(int cap_ms) const {
    if (infinite_) return cap_ms;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left < 0 ? 0 : left > cap_ms ? cap_ms : static_cast<int>(left);
  }

 private:
  bool infinite_ = true;
  Clock::time_point at_{};
};

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

/// A line without a newline longer than this is emitted as a line of its own, so a rank that
/// prints an endless progress bar cannot grow gnio-run's memory without bound.
constexpr std::size_t kMaxLine = 64 * 1024;
/// Bytes read from one pipe per poll round: large enough for throughput, small enough to be fair
/// between ranks.
constexpr std::size_t kReadChunk = 64 * 1024;
/// Two SIGINTs closer than this escalate to SIGKILL.
constexpr double kDoubleInterruptSeconds = 2.0;
/// How long to wait for ranks to disappear after SIGKILL before giving up on them (a process in
/// uninterruptible sleep, e.g. inside a driver, can take a while).
constexpr double kKillWaitSeconds = 10.0;
/// After the last rank exited, how long to keep reading pipes that a leftover grandchild still
/// holds open.
constexpr double kDrainSeconds = 1.0;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/// printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  va_end(ap);
  return out;
}

/// Writes all of `data` to `fd`, retrying short writes and EINTR, and waiting for POLLOUT when
/// the descriptor is non-blocking. Gives up silently on other errors (a closed stdout must not
/// stop the job: the ranks' output is then discarded).
void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else {
      return;
    }
  }
}

/// Prints one diagnostic line "gnio-run: <text>" to stderr with a single write, so it never
/// lands inside a rank's line.
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char text[4096];
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  write_all(STDERR_FILENO, std::string("gnio-run: ") + text + "\n");
}

/// The short name of a signal gnio-run forwards ("INT"), for messages.
const char* signal_abbrev(int sig) {
  switch (sig) {
    case SIGINT: return "INT";
    case SIGTERM: return "TERM";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    case SIGKILL: return "KILL";
    default: return "?";
  }
}

/// "rank" or "ranks" after a count.
const char* ranks_word(std::size_t n) {
  return n == 1 ? "rank" : "ranks";
}

/// A compact list of rank numbers: "0-3", "1,4,6-7".
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

/// How a wait status reads in a message: "exited with code 3", "was killed by signal 9 (Killed)".
std::string describe_status(int status) {
  if (WIFEXITED(status)) return strf("exited with code %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return strf("was killed by signal %d (%s)%s", sig, name ? name : "unknown",
                WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return strf("ended with wait status 0x%x", status);
}

/// The exit status gnio-run reports for a rank's wait status: its exit code, or 128 + signal.
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInternal;
}

/// Seconds as a short human string ("5", "0.5").
std::string seconds_text(double s) {
  return strf("%g s", s);
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

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

/// What the command line asked for besides running a job.
enum class Action { Run, Help, Version };

/// Parses argv into `opt`. Options end at "--" or at the first word that is not an option, so
/// PROG's own options are never taken for gnio-run's. Throws UsageError.
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

// ---------------------------------------------------------------------------------------------
// Job environment
// ---------------------------------------------------------------------------------------------

/// Binds a TCP socket on all addresses to `port` (0: any free one). Returns the socket, or -1;
/// `*bound` receives the port. No SO_REUSEADDR, so a port in TIME_WAIT counts as busy.
int bind_tcp(int port, int* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

/// Picks MASTER_PORT: a port P such that P and P+1 (gnio's default bootstrap port) can both be
/// bound right now. Both are released before the ranks start, so another process could still
/// take them in between; the ranks then fail to bind and say so.
int pick_master_port() {
  int fallback = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    int port = 0;
    int first = bind_tcp(0, &port);
    if (first < 0) break;
    if (!fallback) fallback = port;
    int next_port = 0;
    int second = port < 65535 ? bind_tcp(port + 1, &next_port) : -1;
    ::close(first);
    if (second >= 0) {
      ::close(second);
      return port;
    }
  }
  if (!fallback) {
    say("cannot bind any TCP port to choose MASTER_PORT (%s)", std::strerror(errno));
    std::exit(kExitInternal);
  }
  GNIO_WARN(Tool, "gnio-run: found no free port P with P+1 free as well; using MASTER_PORT=%d",
            fallback);
  return fallback;
}

/// A random 64-bit job token as 16 hex digits, from /dev/urandom (getrandom() as a fallback).
std::string random_token() {
  unsigned long long value = 0;
  bool ok = false;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ok = ::read(fd, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value));
    ::close(fd);
  }
  if (!ok) ok = ::getrandom(&value, sizeof(value), 0) == static_cast<ssize_t>(sizeof(value));
  if (!ok) {
    say("cannot read random bytes for GNIO_JOB_TOKEN (%s)", std::strerror(errno));
    std::exit(kExitInternal);
  }
  return strf("%016llx", value);
}

/// This machine's host name, for simulated node ids.
std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "localhost";
  return name;
}

/// The environment of every rank: gnio-run's own environment minus the variables gnio-run sets,
/// plus the per-rank values, as "NAME=value" strings.
class JobEnvironment {
 public:
  /// Decides the job-wide values (port, token, node id base) once.
  explicit JobEnvironment(const Options& opt) : opt_(opt) {
    master_port_ = pick_master_port();
    std::string token = config_text("GNIO_JOB_TOKEN");
    // An empty token means "none" in the config table, so it gets a fresh one like an unset one.
    token_ = token.empty() ? random_token() : std::string();
    if (opt.nodes > 0) {
      std::string user_node = config_text("GNIO_NODE_ID");
      node_base_ = user_node.empty() ? host_name() : user_node;
    }
  }

  /// "NAME=value" strings for rank `rank`.
  std::vector<std::string> for_rank(int rank) const {
    int nodes = opt_.nodes > 0 ? opt_.nodes : 1;
    int per_node = opt_.ranks / nodes;
    int node = rank / per_node;
    std::vector<std::pair<std::string, std::string>> set = {
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(opt_.ranks)},
        {"LOCAL_RANK", std::to_string(rank % per_node)},
        {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
        {"GROUP_RANK", std::to_string(node)},
        {"GROUP_WORLD_SIZE", std::to_string(nodes)},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(master_port_)},
    };
    if (!token_.empty()) set.emplace_back("GNIO_JOB_TOKEN", token_);
    if (opt_.nodes > 0) {
      set.emplace_back("GNIO_NODE_ID", node_base_ + "/sim" + std::to_string(node));
      // Every simulated node runs on this machine: GPUs are picked by this index, not LOCAL_RANK.
      set.emplace_back("GNIO_MACHINE_LOCAL_RANK", std::to_string(rank));
    }

    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string_view entry(*e);
      std::string_view name = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (const auto& [key, unused] : set) overridden = overridden || name == key;
      if (!overridden) env.emplace_back(entry);
    }
    for (const auto& [key, val] : set) env.push_back(key + "=" + val);
    return env;
  }

  int master_port() const { return master_port_; }
  /// The generated token, or empty when GNIO_JOB_TOKEN was passed through from the environment.
  const std::string& generated_token() const { return token_; }

 private:
  const Options& opt_;
  int master_port_ = 0;
  std::string token_;
  std::string node_base_;
};

// ---------------------------------------------------------------------------------------------
// Ranks and their output
// ---------------------------------------------------------------------------------------------

/// One of a rank's output pipes (stdout or stderr) and the partial line read from it so far.
struct OutputStream {
  int fd = -1;          ///< read end of the pipe; -1 once closed (EOF) or when not captured
  int target = -1;      ///< where complete lines go: STDOUT_FILENO or STDERR_FILENO
  std::string prefix;   ///< "[r] "
  std::string pending;  ///< bytes after the last newline

  /// Appends `data` and writes every complete line, each prefixed, in one write.
  void consume(const char* data, std::size_t n) {
    pending.append(data, n);
    std::string out;
    std::size_t start = 0;
    for (;;) {
      std::size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) {
        if (pending.size() - start < kMaxLine) break;
        nl = start + kMaxLine;  // overlong line: cut it, so memory stays bounded
        out += prefix;
        out.append(pending, start, nl - start);
        out += '\n';
        start = nl;
        continue;
      }
      out += prefix;
      out.append(pending, start, nl + 1 - start);
      start = nl + 1;
    }
    pending.erase(0, start);
    if (!out.empty()) write_all(target, out);
  }

  /// Writes the last partial line (with a newline added) once the pipe is finished.
  void flush_partial() {
    if (pending.empty()) return;
    write_all(target, prefix + pending + "\n");
    pending.clear();
  }

  /// Reads once. Returns false at EOF or on an error (the stream is then closed and flushed).
  bool read_some() {
    char buf[kReadChunk];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      consume(buf, static_cast<std::size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    close_and_flush();
    return false;
  }

  /// Reads everything available now without blocking (the pipe is non-blocking).
  void drain_available() {
    while (fd >= 0) {
      char buf[kReadChunk];
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        consume(buf, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        close_and_flush();
      }
    }
  }

  /// Closes the pipe and writes the partial line.
  void close_and_flush() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    flush_partial();
  }
};

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
  int run() {
    setup_signals();
    raise_fd_limit();
    spawn_all();
    report_exec_failures();
    loop();
    return exit_code_;
  }

 private:
  // --- setup ----------------------------------------------------------------------------------

  /// Blocks the forwarded signals and SIGCHLD and reads them through a signalfd, so the poll loop
  /// sees them in order with the pipes. SIGPIPE is blocked too (a closed stdout gives EPIPE).
  /// Signals that were ignored when gnio-run started (nohup, background jobs) stay ignored.
  void setup_signals() {
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

  /// Raises the soft limit on open files when 2 pipes per rank need it; ranks get the original.
  void raise_fd_limit() {
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

  /// Prints a system error of gnio-run itself, stops any started ranks at once, exits 125.
  [[noreturn]] void fatal_errno(const char* what) {
    int err = errno;
    say("%s failed: %s", what, std::strerror(err));
    for (Rank& r : ranks_)
      if (r.running) signal_rank(r, SIGKILL);
    std::exit(kExitInternal);
  }

  // --- spawning -------------------------------------------------------------------------------

  /// Starts every rank. Exec failures are collected and reported by report_exec_failures().
  void spawn_all() {
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

  /// --bind cores: the CPUs of each of `n` ranks, split from those this process may use: equal,
  /// disjoint, consecutive shares while there are at least `n`; one each, round robin, beyond.
  std::vector<cpu_set_t> cpu_shares(int n) {
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
      for (std::size_t k = i * m / ranks; k < (i + 1) * m / ranks; ++k)
        CPU_SET(cpus[k], &shares[i]);
    }
    return shares;
  }

  /// fork + exec of one rank with its pipes, process group and parent-death signal, on the CPUs
  /// `cpus` when given (--bind). Waits until the exec succeeded or failed (an O_CLOEXEC status
  /// pipe carries exec's errno back).
  void spawn(Rank& r, char** argv, char** envp, int stdin_fd, const cpu_set_t* cpus) {
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, status_pipe[2];
    if (opt_.prefix) {
      if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
        fatal_errno("pipe");
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

  /// A non-blocking read end for the poll loop.
  OutputStream make_stream(int fd, int target, int rank) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    OutputStream s;
    s.fd = fd;
    s.target = target;
    s.prefix = "[" + std::to_string(rank) + "] ";
    return s;
  }

  /// One line per distinct exec error, naming the ranks it hit; then stops the job with 127/126.
  void report_exec_failures() {
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
          rank_ranges(ranks).c_str(), std::strerror(err), hint);
    }
    begin_stop(StopReason::ExecFailed, not_found ? kExitNotFound : kExitCannotExecute, SIGTERM);
  }

  // --- signals to ranks -----------------------------------------------------------------------

  /// Sends `sig` to the rank's process group (its children too), or to the rank alone if it left
  /// the group.
  void signal_rank(const Rank& r, int sig) {
    if (::killpg(r.pid, sig) != 0) ::kill(r.pid, sig);
  }

  /// Number of ranks not yet reaped.
  std::size_t running_count() const {
    std::size_t n = 0;
    for (const Rank& r : ranks_) n += r.running ? 1 : 0;
    return n;
  }

  /// Starts stopping the job: records the first reason and exit status, sends `sig` to every
  /// running rank, and arms the grace deadline after which SIGKILL follows. Later calls keep the
  /// first reason and deadline but still deliver their signal.
  void begin_stop(StopReason reason, int exit_code, int sig) {
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

  /// Sends SIGKILL to every running rank (once) and arms the deadline for their disappearance.
  void kill_all(const char* why) {
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

  /// Handles one signal received by gnio-run.
  void on_signal(int sig) {
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

  /// Reaps every exited rank; the first failure stops the others.
  void reap() {
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

  /// The --timeout expired: names the running ranks and stops them.
  void on_timeout() {
    std::string list;
    std::size_t n = 0;
    for (const Rank& r : ranks_) {
      if (!r.running) continue;
      list +=
          strf("%srank %d (pid %d)", list.empty() ? "" : ", ", r.index, static_cast<int>(r.pid));
      ++n;
    }
    say("timeout: the job ran longer than %s; %zu of %d ranks still running: %s; sending SIGTERM "
        "(SIGKILL after %s)",
        seconds_text(opt_.timeout).c_str(), n, opt_.ranks, list.c_str(),
        seconds_text(opt_.grace).c_str());
    begin_stop(StopReason::Timeout, kExitTimeout, SIGTERM);
  }

  // --- the loop -------------------------------------------------------------------------------

  /// Polls pipes and the signalfd until every rank is reaped and its output written, handling
  /// the timeout, grace and kill deadlines in between.
  void loop() {
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
          for (Rank& r : ranks_) {
            r.out.drain_available();
            r.err.drain_available();
            r.out.close_and_flush();
            r.err.close_and_flush();
          }
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
        for (Rank& r : ranks_) {
          r.out.drain_available();
          r.err.drain_available();
          r.out.close_and_flush();
          r.err.close_and_flush();
        }
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

  /// Handles every signal queued on the signalfd.
  void read_signals() {
    signalfd_siginfo info;
    for (;;) {
      ssize_t n = ::read(signal_fd_, &info, sizeof(info));
      if (n != static_cast<ssize_t>(sizeof(info))) return;
      on_signal(static_cast<int>(info.ssi_signo));
    }
  }

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

}  // namespace
}  // namespace gnio::run

int main(int argc, char** argv) {
  using namespace gnio::run;
  // A closed stdin/stdout/stderr would be reused by the first pipe or signalfd and confuse the
  // ranks' descriptors: park /dev/null on them first.
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  Options opt;
  try {
    switch (parse_args(argc, argv, &opt)) {
      case Action::Help: print_help(); return 0;
      case Action::Version:
        write_all(STDOUT_FILENO, "gnio-run (gnio) " GNIO_VERSION_STRING "\n");
        return 0;
      case Action::Run: break;
    }
  } catch (const UsageError& e) {
    say("%s", e.message.c_str());
    write_all(STDERR_FILENO, std::string(kUsage) + "Run 'gnio-run --help' for details.\n");
    return kExitUsage;
  }
  try {
    Launcher launcher(opt);
    return launcher.run();
  } catch (const gnio::Error& e) {
    say("%s", e.what());
    return kExitInternal;
  }
}
