#include "core/flight_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace gnio::detail {

const char* to_string(FlightEvent e) noexcept {
  switch (e) {
    case FlightEvent::Collective: return "collective";
    case FlightEvent::Alloc: return "alloc";
    case FlightEvent::Free: return "free";
    case FlightEvent::Register: return "register";
    case FlightEvent::Deregister: return "deregister";
    case FlightEvent::Split: return "split";
    case FlightEvent::Synchronize: return "synchronize";
    case FlightEvent::Check: return "check";
    case FlightEvent::Abort: return "abort";
  }
  return "?";
}

namespace {

/// Local events (synchronize, check, abort) are not matched across ranks: no sequence stream.
bool is_local(FlightEvent e) {
  return e == FlightEvent::Synchronize || e == FlightEvent::Check || e == FlightEvent::Abort;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// `s` as a JSON string literal.
std::string quoted(const char* s) {
  if (!s) return "null";
  std::string out = "\"";
  for (const char* p = s; *p; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

FlightRecorder::FlightRecorder(std::size_t capacity) : ring_(capacity) {}

void FlightRecorder::record(FlightEntry e) noexcept {
  if (ring_.empty()) return;
  e.time_ns = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  if (is_local(e.event)) {
    // A polling loop of check() or synchronize() would flush the ring: repeats of the newest
    // entry only refresh its time and count the calls.
    FlightEntry& last = ring_[(next_ + ring_.size() - 1) % ring_.size()];
    if (next_ > 0 && last.event == e.event && last.stream == e.stream) {
      last.time_ns = e.time_ns;
      ++last.count;
      return;
    }
    e.count = 1;
    e.stream_seq = 0;
  } else if (e.event == FlightEvent::Collective) {
    e.channel = std::clamp(e.channel, 0, kMaxChannels - 1);
    e.stream_seq = ++channel_seq_[e.channel];
  } else {
    e.channel = -1;
    e.stream_seq = ++host_seq_;
  }
  e.seq = ++next_;
  ring_[(e.seq - 1) % ring_.size()] = e;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  if (ring_.empty()) return out;
  const std::uint64_t n = std::min<std::uint64_t>(next_, ring_.size());
  out.reserve(n);
  for (std::uint64_t s = next_ - n + 1; s <= next_; ++s)
    out.push_back(ring_[(s - 1) % ring_.size()]);
  return out;
}

std::uint64_t FlightRecorder::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

std::string flight_dump_path(const std::string& dir, std::uint32_t comm_id, int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "gnio-flight-%08x-rank%d.json", comm_id, rank);
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool FlightRecorder::dump(const std::string& path, std::uint32_t comm_id, int rank, int size,
                          const char* reason, const std::string& detail, std::string* error) const {
  const std::vector<FlightEntry> entries = snapshot();
  std::string s;
  s.reserve(256 + entries.size() * 240);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\n  \"format\": \"gnio-flight-1\",\n  \"comm\": \"%08x\",\n  \"rank\": %d,\n"
                "  \"size\": %d,\n  \"pid\": %d,\n  \"time_ns\": %lld,\n  \"capacity\": %zu,\n"
                "  \"recorded\": %llu,\n  \"reason\": ",
                comm_id, rank, size, static_cast<int>(getpid()), static_cast<long long>(now_ns()),
                ring_.size(), static_cast<unsigned long long>(recorded()));
  s += buf;
  s += quoted(reason);
  s += ",\n  \"detail\": ";
  s += quoted(detail.c_str());
  s += ",\n  \"entries\": [";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const FlightEntry& e = entries[i];
    std::snprintf(
        buf, sizeof(buf),
        "%s\n    {\"seq\": %llu, \"event\": \"%s\", \"channel\": %d, \"stream_seq\": %llu, "
        "\"time_ns\": %lld, \"count\": %llu, \"root\": %d, \"stream\": \"0x%llx\", ",
        i ? "," : "", static_cast<unsigned long long>(e.seq), to_string(e.event), e.channel,
        static_cast<unsigned long long>(e.stream_seq), static_cast<long long>(e.time_ns),
        static_cast<unsigned long long>(e.count), e.root,
        static_cast<unsigned long long>(e.stream));
    s += buf;
    s += "\"what\": " + quoted(e.what) + ", \"type\": " + quoted(e.type) +
         ", \"op\": " + quoted(e.op) + ", \"algo\": " + quoted(e.algo) + "}";
  }
  s += "\n  ]\n}\n";
  // Per reason: the watcher thread and the caller's thread may dump at the same moment. Hidden
  // (a leading dot) in the same directory, so that a dump cut short (the process killed while
  // writing) is not taken for a rank's dump by whoever lists gnio-flight-*.
  const std::size_t slash = path.rfind('/');
  const std::string tmp = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                          "." + path.substr(slash == std::string::npos ? 0 : slash + 1) + "." +
                          reason + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    *error = tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  const int close_rc = std::fclose(f);
  if (!ok || close_rc != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace gnio::detail
