// Tests of gnio-run: the environment it gives each rank, prefixed output under stress, failure
// propagation (exit code, signal death, timeout, exec failure), signal forwarding and the grace
// period, CPU binding (--bind) and argument errors. Every run is bounded: a gnio-run that
// outlives its bound is killed and the test fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/job.hpp"
#include "probe_payload.hpp"

namespace gnio::launcher_test {
namespace {

using gnio_test::Clock;
using gnio_test::seconds_since;

/// A run of gnio-run (tests/common/job.hpp) with the probe's "ready" protocol on top.
class Job : public gnio_test::Job {
 public:
  explicit Job(const std::vector<std::string>& args, const std::vector<std::string>& env = {})
      : gnio_test::Job(GNIO_RUN_EXE, args, env) {}

  /// Waits until `count` ranks printed their "ready" line.
  bool wait_ready(int count, double seconds = 10) {
    return wait_until([&] { return ready_pids().size() == static_cast<std::size_t>(count); },
                      seconds);
  }

  /// Pids from the ranks' "ready rank=R pid=P" lines, by rank.
  std::map<int, int> ready_pids() const {
    std::map<int, int> pids;
    static const std::regex re(R"(\[(\d+)\] ready rank=(\d+) pid=(\d+))");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it)
      pids[std::stoi((*it)[2])] = std::stoi((*it)[3]);
    return pids;
  }
};

/// Splits text into lines (without the newlines); a final unterminated piece is a line too.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The "env NAME=value ..." line of each rank, parsed: rank -> (name -> value).
std::map<int, std::map<std::string, std::string>> parse_env(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> result;
  static const std::regex re(R"(^\[(\d+)\] env (.*)$)");
  for (const std::string& line : lines_of(out)) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    std::istringstream words(m[2].str());
    auto& vars = result[std::stoi(m[1])];
    for (std::string w; words >> w;) {
      std::size_t eq = w.find('=');
      vars[w.substr(0, eq)] = w.substr(eq + 1);
    }
  }
  return result;
}

/// A file path unique to this test, removed on destruction.
struct TempPath {
  std::string path =
      "/tmp/gnio_launcher_test." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  ~TempPath() { ::unlink(path.c_str()); }
  /// Creates the file.
  void touch() const { ::close(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
  static inline int counter = 0;
};

/// This machine's host name, as gnio-run uses it for simulated node ids.
std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

const std::string kProbe = GNIO_LAUNCHER_PROBE_EXE;

TEST(Launcher, SetsTorchrunVariablesForEveryRank) {
  Job run({"-n", "4", "--", kProbe, "--env"});
  ASSERT_EQ(run.finish(20), 0) << run.err;
  EXPECT_EQ(run.err, "");
  auto env = parse_env(run.out);
  ASSERT_EQ(env.size(), 4u) << run.out;
  std::set<std::string> ports, tokens;
  for (auto& [rank, vars] : env) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(vars["RANK"], std::to_string(rank));
    EXPECT_EQ(vars["WORLD_SIZE"], "4");
    EXPECT_EQ(vars["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(vars["GROUP_RANK"], "0");
    EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(vars["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(vars["GNIO_NODE_ID"], "<unset>");  // the library derives it without --nodes
    int port = std::atoi(vars["MASTER_PORT"].c_str());
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65535);  // MASTER_PORT + 1 must exist for the bootstrap
    EXPECT_TRUE(std::regex_match(vars["GNIO_JOB_TOKEN"], std::regex("[0-9a-f]{16}")))
        << vars["GNIO_JOB_TOKEN"];
    ports.insert(vars["MASTER_PORT"]);
    tokens.insert(vars["GNIO_JOB_TOKEN"]);
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(tokens.size(), 1u);

  // A second job gets its own token.
  Job again({"-n", "1", kProbe, "--env"});
  ASSERT_EQ(again.finish(20), 0) << again.err;
  EXPECT_NE(parse_env(again.out)[0]["GNIO_JOB_TOKEN"], *tokens.begin());
}

TEST(Launcher, SimulatedNodesGetOwnNodeIdsAndLocalRanks) {
  Job run({"-n", "4", "--nodes", "2", "--", kProbe, "--env"});
  ASSERT_EQ(run.finish(20), 0) << run.err;
  auto env = parse_env(run.out);
  ASSERT_EQ(env.size(), 4u) << run.out;
  for (auto& [rank, vars] : env) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(vars["RANK"], std::to_string(rank));
    EXPECT_EQ(vars["WORLD_SIZE"], "4");
    EXPECT_EQ(vars["LOCAL_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(vars["GROUP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(vars["GNIO_NODE_ID"], host_name() + "/sim" + std::to_string(rank / 2));
  }
  EXPECT_EQ(env[0]["GNIO_NODE_ID"], env[1]["GNIO_NODE_ID"]);
  EXPECT_NE(env[1]["GNIO_NODE_ID"], env[2]["GNIO_NODE_ID"]);
}

TEST(Launcher, PassesUserTokenThroughAndSuffixesUserNodeId) {
  Job run({"-n", "2", "--nodes", "2", kProbe, "--env"},
          {"GNIO_NODE_ID=rack7", "GNIO_JOB_TOKEN=0123456789abcdef", "MASTER_PORT=1"});
  ASSERT_EQ(run.finish(20), 0) << run.err;
  auto env = parse_env(run.out);
  ASSERT_EQ(env.size(), 2u) << run.out;
  EXPECT_EQ(env[0]["GNIO_NODE_ID"], "rack7/sim0");
  EXPECT_EQ(env[1]["GNIO_NODE_ID"], "rack7/sim1");
  EXPECT_EQ(env[0]["GNIO_JOB_TOKEN"], "0123456789abcdef");
  EXPECT_EQ(env[1]["GNIO_JOB_TOKEN"], "0123456789abcdef");
  EXPECT_NE(env[0]["MASTER_PORT"], "1");  // gnio-run picks its own free port
}

TEST(Launcher, PrefixedLinesStayIntactUnderInterleaving) {
  constexpr int kRanks = 6, kLines = 4000;
  Job run({"-n", std::to_string(kRanks), kProbe, "--lines", std::to_string(kLines)});
  ASSERT_EQ(run.finish(30), 0) << run.err.substr(0, 2000);
  for (auto [stream, text] : {std::pair{'o', &run.out}, std::pair{'e', &run.err}}) {
    SCOPED_TRACE(stream == 'o' ? "stdout" : "stderr");
    std::vector<int> next(kRanks, 0);
    std::vector<bool> tail(kRanks, false);
    int bad = 0;
    for (const std::string& line : lines_of(*text)) {
      // "[r] body", parsed by hand: std::regex recurses per character on 6000-byte lines.
      std::size_t close = line.find("] ");
      int rank = -1;
      if (line.size() > 1 && line[0] == '[' && close != std::string::npos && close > 1 &&
          line.find_first_not_of("0123456789", 1) == close)
        rank = std::stoi(line.substr(1, close - 1));
      if (rank < 0 || rank >= kRanks) {
        if (bad++ < 3) ADD_FAILURE() << "line without a rank prefix: " << line.substr(0, 200);
        continue;
      }
      std::string body = line.substr(close + 2);
      if (body == "tail " + std::to_string(rank)) {
        EXPECT_EQ(next[rank], kLines) << "tail of rank " << rank << " came early";
        tail[rank] = true;
      } else if (next[rank] >= kLines || body != probe_line(rank, stream, next[rank])) {
        if (bad++ < 3)
          ADD_FAILURE() << "rank " << rank << " line " << next[rank]
                        << " is wrong or mixed: " << line.substr(0, 200);
      } else {
        ++next[rank];
      }
    }
    EXPECT_EQ(bad, 0);
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(next[r], kLines) << "rank " << r;
      EXPECT_TRUE(tail[r]) << "partial last line of rank " << r << " lost";
    }
  }
}

TEST(Launcher, NoPrefixPassesOutputThrough) {
  for (bool by_env : {false, true}) {
    SCOPED_TRACE(by_env ? "GNIO_RUN_PREFIX=0" : "--no-prefix");
    std::vector<std::string> args = {"-n", "2"};
    if (!by_env) args.push_back("--no-prefix");
    args.insert(args.end(), {kProbe, "--env"});
    Job run(args,
            by_env ? std::vector<std::string>{"GNIO_RUN_PREFIX=0"} : std::vector<std::string>{});
    ASSERT_EQ(run.finish(20), 0) << run.err;
    // Each env line is one write(2) of less than PIPE_BUF, so it arrives whole even unprefixed.
    auto lines = lines_of(run.out);
    std::set<std::string> ranks_seen;
    for (const std::string& line : lines) {
      EXPECT_EQ(line.rfind("env RANK=", 0), 0u) << line;
      ranks_seen.insert(line.substr(0, line.find(' ', 4)));
    }
    EXPECT_EQ(ranks_seen, (std::set<std::string>{"env RANK=0", "env RANK=1"})) << run.out;
  }
}

TEST(Launcher, FailingRankStatusPropagatesAndOthersStop) {
  TempPath go;
  Job run({"-n", "4", "--grace", "3", kProbe, "--ready", "--wait-file", go.path, "--exit-rank", "2",
           "7", "--sleep", "30"});
  ASSERT_TRUE(run.wait_ready(4)) << run.out << run.err;
  auto start = Clock::now();
  go.touch();
  EXPECT_EQ(run.finish(20), 7) << run.err;
  EXPECT_LT(seconds_since(start), 2.5) << "survivors should stop at SIGTERM, before the grace";
  std::string expected = "gnio-run: rank 2 (pid " + std::to_string(run.ready_pids()[2]) +
                         ") exited with code 7; stopping the other 3 ranks\n";
  EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("SIGKILL"), std::string::npos) << run.err;
}

TEST(Launcher, SignalDeathGives128PlusSignal) {
  TempPath go;
  Job run({"-n", "3", kProbe, "--ready", "--wait-file", go.path, "--kill-rank", "1", "9", "--sleep",
           "30"});
  ASSERT_TRUE(run.wait_ready(3)) << run.out << run.err;
  go.touch();
  EXPECT_EQ(run.finish(20), 128 + 9) << run.err;
  std::string expected = "gnio-run: rank 1 (pid " + std::to_string(run.ready_pids()[1]) +
                         ") was killed by signal 9 (Killed); stopping the other 2 ranks\n";
  EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
}

TEST(Launcher, TimeoutStopsJobAndNamesRunningRanks) {
  Job run({"-n", "3", "--timeout", "1", "--grace", "2", kProbe, "--ready", "--sleep", "30"});
  EXPECT_EQ(run.finish(20), 124) << run.err;
  EXPECT_GE(run.elapsed(), 1.0);
  EXPECT_LT(run.elapsed(), 4.0);
  auto pids = run.ready_pids();
  ASSERT_EQ(pids.size(), 3u) << run.out;
  EXPECT_NE(run.err.find("timeout"), std::string::npos) << run.err;
  for (auto [rank, pid] : pids)
    EXPECT_NE(run.err.find("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")"),
              std::string::npos)
        << run.err;
}

TEST(Launcher, ForwardsSigtermToRanks) {
  // A long grace, so that a rank starved of CPU (sanitizers on a 2-core machine) still exits on
  // the forwarded SIGTERM, not on the launcher's SIGKILL; the bound only has to tell the two apart.
  Job run({"-n", "3", "--grace", "30", kProbe, "--ready", "--catch-term", "--sleep", "60"});
  ASSERT_TRUE(run.wait_ready(3)) << run.out << run.err;
  auto start = Clock::now();
  run.signal(SIGTERM);
  EXPECT_EQ(run.finish(60), 128 + SIGTERM) << run.err;
  EXPECT_LT(seconds_since(start), 20.0);
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(
        run.out.find("[" + std::to_string(r) + "] rank " + std::to_string(r) + " got SIGTERM\n"),
        std::string::npos)
        << run.out;
  EXPECT_NE(run.err.find("received SIGTERM"), std::string::npos) << run.err;
}

TEST(Launcher, RankIgnoringSigtermIsKilledAfterGrace) {
  TempPath go;
  Job run({"-n", "3", "--grace", "1", kProbe, "--ready", "--ignore-term", "--wait-file", go.path,
           "--exit-rank", "0", "5", "--sleep", "30"});
  ASSERT_TRUE(run.wait_ready(3)) << run.out << run.err;
  auto start = Clock::now();
  go.touch();
  EXPECT_EQ(run.finish(20), 5) << run.err;
  double took = seconds_since(start);
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 4.0);
  auto pids = run.ready_pids();
  EXPECT_NE(run.err.find("sending SIGKILL to rank 1 (pid " + std::to_string(pids[1]) +
                         "), rank 2 (pid " + std::to_string(pids[2]) + ")"),
            std::string::npos)
      << run.err;
}

TEST(Launcher, SecondSigintKillsAtOnce) {
  Job run({"-n", "2", "--grace", "30", kProbe, "--ready", "--ignore-int", "--sleep", "30"});
  ASSERT_TRUE(run.wait_ready(2)) << run.out << run.err;
  auto start = Clock::now();
  run.signal(SIGINT);
  ASSERT_TRUE(
      run.wait_until([&] { return run.err.find("received SIGINT") != std::string::npos; }, 5))
      << run.err;
  run.signal(SIGINT);
  EXPECT_EQ(run.finish(20), 128 + SIGINT) << run.err;
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_NE(run.err.find("second SIGINT"), std::string::npos) << run.err;
}

/// True when `pid` is gone or a zombie (a container's init may be slow to reap orphans).
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z';
}

TEST(Launcher, KilledLauncherLeavesNoRanksBehind) {
  Job run({"-n", "3", kProbe, "--ready", "--ignore-term", "--sleep", "30"});
  ASSERT_TRUE(run.wait_ready(3)) << run.out << run.err;
  auto pids = run.ready_pids();
  run.signal(SIGKILL);  // no chance to forward anything: PR_SET_PDEATHSIG must do it
  EXPECT_EQ(run.finish(10), 128 + SIGKILL);
  auto start = Clock::now();
  for (auto [rank, pid] : pids) {
    while (!process_gone(pid) && seconds_since(start) < 5) ::usleep(10000);
    EXPECT_TRUE(process_gone(pid)) << "rank " << rank << " (pid " << pid << ") outlived gnio-run";
  }
}

TEST(Launcher, ExecFailureIsReportedOnceAndExits127) {
  for (std::string prog : {"gnio-no-such-program-xyz", "/nonexistent/dir/prog"}) {
    SCOPED_TRACE(prog);
    Job run({"-n", "3", prog});
    EXPECT_EQ(run.finish(20), 127) << run.err;
    EXPECT_EQ(run.out, "");
    auto lines = lines_of(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.err;
    EXPECT_NE(lines[0].find("cannot execute '" + prog + "' for ranks 0-2"), std::string::npos)
        << run.err;
    EXPECT_NE(lines[0].find("No such file"), std::string::npos) << run.err;
  }
}

/// The CPUs in a Cpus_allowed_list value ("0-3,6").
std::set<int> parse_cpu_list(const std::string& text) {
  std::set<int> cpus;
  std::istringstream in(text);
  for (std::string range; std::getline(in, range, ',');) {
    const std::size_t dash = range.find('-');
    const int lo = std::stoi(range.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return cpus;
}

/// Each rank's allowed CPUs, from "[r] Cpus_allowed_list:<tab>LIST" lines.
std::map<int, std::set<int>> allowed_cpus_of(const std::string& out) {
  std::map<int, std::set<int>> result;
  static const std::regex re(R"(^\[(\d+)\] Cpus_allowed_list:\s*(\S+)$)");
  for (const std::string& line : lines_of(out)) {
    std::smatch m;
    if (std::regex_match(line, m, re)) result[std::stoi(m[1])] = parse_cpu_list(m[2]);
  }
  return result;
}

TEST(Launcher, BindCoresGivesEachRankItsOwnShareOfTheCpus) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  std::set<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) allowed.insert(c);
  const std::string show = "grep Cpus_allowed_list /proc/self/status";
  // As many ranks as CPUs (at most 4): one CPU each, all different; without --bind, all of them.
  const int n = static_cast<int>(std::min<std::size_t>(allowed.size(), 4));
  Job bound({"-n", std::to_string(n), "--bind", "cores", "--", "sh", "-c", show});
  ASSERT_EQ(bound.finish(20), 0) << bound.err;
  const auto shares = allowed_cpus_of(bound.out);
  ASSERT_EQ(shares.size(), static_cast<std::size_t>(n)) << bound.out;
  std::set<int> seen;
  for (const auto& [rank, cpus] : shares) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_FALSE(cpus.empty());
    for (int c : cpus) {
      EXPECT_TRUE(allowed.count(c)) << "CPU " << c << " is not one gnio-run may use";
      EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " given to two ranks";
    }
  }
  // More ranks than CPUs: round robin, one CPU each.
  Job crowded(
      {"-n", std::to_string(allowed.size() + 1), "--bind", "cores", "--", "sh", "-c", show});
  ASSERT_EQ(crowded.finish(20), 0) << crowded.err;
  for (const auto& [rank, cpus] : allowed_cpus_of(crowded.out))
    EXPECT_EQ(cpus.size(), 1u) << "rank " << rank;
  Job free_run({"-n", "2", "--", "sh", "-c", show});
  ASSERT_EQ(free_run.finish(20), 0) << free_run.err;
  for (const auto& [rank, cpus] : allowed_cpus_of(free_run.out)) EXPECT_EQ(cpus, allowed);
}

TEST(Launcher, BadArgumentsExit2WithAMessage) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"-n"},
      {"-n", "0", "true"},
      {"-n", "x", "true"},
      {"-n", "4"},
      {"-n", "3", "--nodes", "2", "true"},
      {"--bogus", "-n", "2", "true"},
      {"-n", "2", "--timeout", "-1", "true"},
      {"-n", "2", "--grace", "soon", "true"},
      {"-n", "2", "--bind", "sockets", "true"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    SCOPED_TRACE("gnio-run " + joined);
    Job run(args);
    EXPECT_EQ(run.finish(10), 2) << run.err;
    EXPECT_EQ(run.err.rfind("gnio-run: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find("Usage: gnio-run"), std::string::npos) << run.err;
  }
  Job bad_env({"-n", "1", "true"}, {"GNIO_RUN_PREFIX=maybe"});
  EXPECT_EQ(bad_env.finish(10), 2);
  EXPECT_NE(bad_env.err.find("GNIO_RUN_PREFIX"), std::string::npos) << bad_env.err;
}

TEST(Launcher, HelpAndVersion) {
  Job help({"--help"});
  EXPECT_EQ(help.finish(10), 0);
  EXPECT_EQ(help.out.rfind("Usage: gnio-run", 0), 0u) << help.out;
  EXPECT_NE(help.out.find("Exit status"), std::string::npos);
  Job version({"--version"});
  EXPECT_EQ(version.finish(10), 0);
  EXPECT_EQ(version.out.rfind("gnio-run (gnio) ", 0), 0u) << version.out;
}

}  // namespace
}  // namespace gnio::launcher_test
