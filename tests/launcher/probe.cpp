// gnio_launcher_probe: the program launcher_test runs under gnio-run. Its behaviour is chosen by
// arguments, applied in this order:
//
//   --ignore-term / --catch-term   ignore SIGTERM / print "rank R got SIGTERM" and exit 0 on it
//   --ignore-int                   ignore SIGINT
//   --ready                        print "ready rank=R pid=P"
//   --env                          print "env NAME=value ..." for the launcher variables
//   --lines N                      print N checkable lines to stdout and to stderr, each written in
//                                  fragments, then "tail R" without a newline on both
//   --wait-file PATH               (acting rank only) wait until PATH exists before acting
//   --exit-rank R CODE             rank R exits with CODE
//   --kill-rank R SIG              rank R kills itself with signal SIG
//   --sleep S                      sleep S seconds, then exit 0
//
// All output goes through write(2), never stdio buffers, so what gnio-run sees is exactly what
// the probe wrote, fragment by fragment.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "probe_payload.hpp"

namespace {

/// This process's RANK (-1 when unset).
int g_rank = -1;

/// write(2) of the whole string, retrying short writes.
void put(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// SIGTERM handler of --catch-term: one line through write(2), then a clean exit.
void on_term(int) {
  char line[64];
  int len = 0;
  const char* head = "rank ";
  for (const char* p = head; *p; ++p) line[len++] = *p;
  char digits[16];
  int nd = 0;
  int r = g_rank < 0 ? 0 : g_rank;
  do digits[nd++] = static_cast<char>('0' + r % 10);
  while ((r /= 10) > 0);
  while (nd) line[len++] = digits[--nd];
  const char* tail = " got SIGTERM\n";
  for (const char* p = tail; *p; ++p) line[len++] = *p;
  ssize_t ignored = ::write(STDOUT_FILENO, line, static_cast<std::size_t>(len));
  (void)ignored;
  ::_exit(0);
}

/// Sleeps `seconds`, resuming after interruptions by handled signals.
void sleep_for(double seconds) {
  timespec left{
      static_cast<time_t>(seconds),
      static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

/// The launcher variables as one line.
void print_env() {
  std::string line = "env";
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "GNIO_JOB_TOKEN", "GNIO_NODE_ID"}) {
    const char* value = std::getenv(name);
    line += std::string(" ") + name + "=" + (value ? value : "<unset>");
  }
  put(STDOUT_FILENO, line + "\n");
}

/// Writes one line in up to three fragments, so gnio-run has to reassemble it.
void put_fragmented(int fd, const std::string& line, int index) {
  std::string text = line + "\n";
  std::size_t a = std::min<std::size_t>(text.size(), static_cast<std::size_t>(index % 7));
  std::size_t b = std::min<std::size_t>(text.size(), a + static_cast<std::size_t>(index % 13) + 5);
  put(fd, text.substr(0, a));
  put(fd, text.substr(a, b - a));
  put(fd, text.substr(b));
}

/// --lines N: N lines on each stream, interleaved, then unterminated tails.
void print_lines(int count) {
  using gnio::launcher_test::probe_line;
  for (int i = 0; i < count; ++i) {
    put_fragmented(STDOUT_FILENO, probe_line(g_rank, 'o', i), i);
    put_fragmented(STDERR_FILENO, probe_line(g_rank, 'e', i), i);
  }
  put(STDOUT_FILENO, "tail " + std::to_string(g_rank));
  put(STDERR_FILENO, "tail " + std::to_string(g_rank));
}

/// Waits (at most 20 s) until `path` exists.
void wait_for_file(const std::string& path) {
  struct stat st;
  for (int i = 0; i < 2000 && ::stat(path.c_str(), &st) != 0; ++i) sleep_for(0.01);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* r = std::getenv("RANK")) g_rank = std::atoi(r);
  bool ready = false, env = false;
  int lines = 0, exit_rank = -1, exit_code = 0, kill_rank = -1, kill_signal = 0;
  double sleep_seconds = 0;
  std::string wait_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--ignore-term") {
      ::signal(SIGTERM, SIG_IGN);
    } else if (a == "--catch-term") {
      ::signal(SIGTERM, on_term);
    } else if (a == "--ignore-int") {
      ::signal(SIGINT, SIG_IGN);
    } else if (a == "--ready") {
      ready = true;
    } else if (a == "--env") {
      env = true;
    } else if (a == "--lines") {
      lines = std::stoi(next());
    } else if (a == "--wait-file") {
      wait_file = next();
    } else if (a == "--exit-rank") {
      exit_rank = std::stoi(next());
      exit_code = std::stoi(next());
    } else if (a == "--kill-rank") {
      kill_rank = std::stoi(next());
      kill_signal = std::stoi(next());
    } else if (a == "--sleep") {
      sleep_seconds = std::stod(next());
    } else {
      put(STDERR_FILENO, "probe: unknown argument " + a + "\n");
      return 99;
    }
  }
  if (ready)
    put(STDOUT_FILENO,
        "ready rank=" + std::to_string(g_rank) + " pid=" + std::to_string(::getpid()) + "\n");
  if (env) print_env();
  if (lines > 0) print_lines(lines);
  if (g_rank == exit_rank || g_rank == kill_rank) {
    if (!wait_file.empty()) wait_for_file(wait_file);
    if (g_rank == exit_rank) return exit_code;
    ::signal(kill_signal, SIG_DFL);
    ::kill(::getpid(), kill_signal);
    sleep_for(5);
    return 98;  // the signal did not kill us
  }
  sleep_for(sleep_seconds);
  return 0;
}
