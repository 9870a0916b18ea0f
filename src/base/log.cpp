#include "gnio/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace gnio {
namespace {

constexpr const char* kSubsysNames[] = {"init", "bootstrap", "memory", "transport", "proxy",
                                        "coll", "device",    "net",    "eth",       "tool"};
constexpr int kNumSubsys = sizeof(kSubsysNames) / sizeof(kSubsysNames[0]);

struct LogConfig {
  std::atomic<int> level{-1};  // -1: not read yet
  bool subsys_on[kNumSubsys] = {};
  FILE* out = stderr;
  std::mutex mutex;
};

LogConfig& config() {
  static LogConfig* c = new LogConfig();  // never destroyed: logging works during static teardown
  return *c;
}

std::atomic<int> g_rank{-1};

int parse_level(const char* s) {
  if (!s || !*s) return static_cast<int>(LogLevel::Warn);
  if (!strcasecmp(s, "NONE") || !strcasecmp(s, "OFF")) return 0;
  if (!strcasecmp(s, "WARN") || !strcasecmp(s, "VERSION")) return 1;
  if (!strcasecmp(s, "INFO")) return 2;
  if (!strcasecmp(s, "TRACE")) return 3;
  return static_cast<int>(LogLevel::Warn);
}

std::string expand_file_name(const char* pattern) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

void load(LogConfig& c) {
  std::lock_guard<std::mutex> lock(c.mutex);
  const char* subsys = std::getenv("GNIO_DEBUG_SUBSYS");
  bool exclude_mode = subsys && subsys[0] == '^';
  for (bool& on : c.subsys_on) on = !subsys || !*subsys || exclude_mode;
  if (subsys && *subsys) {
    std::string list = exclude_mode ? subsys + 1 : subsys;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string word = list.substr(pos, end - pos);
      bool neg = exclude_mode;
      if (!word.empty() && word[0] == '^') {
        neg = true;
        word.erase(0, 1);
      }
      for (int i = 0; i < kNumSubsys; ++i)
        if (!strcasecmp(word.c_str(), kSubsysNames[i]) || !strcasecmp(word.c_str(), "all"))
          c.subsys_on[i] = !neg;
      pos = end + 1;
    }
  }
  const char* file = std::getenv("GNIO_DEBUG_FILE");
  if (file && *file) {
    std::string name = expand_file_name(file);
    if (FILE* f = std::fopen(name.c_str(), "a")) {
      if (c.out != stderr) std::fclose(c.out);
      c.out = f;
    }
  }
  c.level.store(parse_level(std::getenv("GNIO_DEBUG")), std::memory_order_release);
}

}  // namespace

bool log_enabled(LogLevel level, LogSubsys subsys) noexcept {
  LogConfig& c = config();
  int lv = c.level.load(std::memory_order_acquire);
  if (lv < 0) {
    load(c);
    lv = c.level.load(std::memory_order_acquire);
  }
  return static_cast<int>(level) <= lv && c.subsys_on[static_cast<int>(subsys)];
}

void log(LogLevel level, LogSubsys subsys, const char* fmt, ...) noexcept {
  LogConfig& c = config();
  static const char* kLevelNames[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  int rank = g_rank.load(std::memory_order_relaxed);
  char rank_text[24] = "[-]";
  if (rank >= 0) std::snprintf(rank_text, sizeof(rank_text), "[%d]", rank);
  std::lock_guard<std::mutex> lock(c.mutex);
  std::fprintf(c.out, "%s:%d:%ld %s gnio %s %s: %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), rank_text,
               kLevelNames[static_cast<int>(level)], kSubsysNames[static_cast<int>(subsys)], text);
  std::fflush(c.out);
}

void set_log_rank(int rank) noexcept { g_rank.store(rank, std::memory_order_relaxed); }

void reload_log_config() noexcept { load(config()); }

}  // namespace gnio
