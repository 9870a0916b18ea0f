#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace gnio::perf {
std::string json_quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    switch (c) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\t': q += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          q += buf;
        } else {
          q += c;
        }
    }
  }
  return q + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

Stats stats_of(std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

void TablePrinter::begin(const std::string& title, const std::string& time_meaning) {
  std::fprintf(out_, "#\n# %s\n#   time = %s\n", title.c_str(), time_meaning.c_str());
  std::fprintf(out_, "#%12s %8s %11s %11s %11s %11s %11s %8s\n", "size(B)", "iters", "time(us)",
               "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(out_);
}

void TablePrinter::row(const Row& r) {
  std::fprintf(out_, " %12llu %8u %11.2f %11.2f %11.2f %11.2f %11.2f %8llu\n",
               static_cast<unsigned long long>(r.bytes), r.iters, r.median_us, r.min_us, r.max_us,
               r.gbps, r.gbps * r.bus_factor, static_cast<unsigned long long>(r.wrong));
  std::fflush(out_);
}

void TablePrinter::end() {
  std::fflush(out_);
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::vector<std::string> objects;
  objects.reserve(rows.size());
  for (const Row& r : rows)
    objects.push_back(
        "{\"op\": " + json_quote(r.op) + ", \"scope\": " + json_quote(r.scope) +
        ", \"mode\": " + json_quote(r.mode) + ", \"bytes\": " + std::to_string(r.bytes) +
        ", \"iters\": " + std::to_string(r.iters) + ", \"median_us\": " + json_number(r.median_us) +
        ", \"min_us\": " + json_number(r.min_us) + ", \"max_us\": " + json_number(r.max_us) +
        ", \"gbps\": " + json_number(r.gbps) + ", \"wrong\": " + std::to_string(r.wrong) + "}");
  write_json_rows(path, info, objects);
}

void write_json_rows(const std::string& path, const RunInfo& info,
                     const std::vector<std::string>& rows) {
  std::string out = "{\n";
  auto field = [&](const char* key, const std::string& json_value, bool last = false) {
    out += "  " + json_quote(key) + ": " + json_value + (last ? "\n" : ",\n");
  };
  field("schema", json_quote("gnio-perf/1"));
  field("library", json_quote(info.library));
  field("subcommand", json_quote(info.subcommand));
  field("version", json_quote(info.version));
  field("date", json_quote(utc_timestamp()));
  field("host", json_quote(host_name()));
  field("backend", json_quote(info.backend));
  field("device", json_quote(info.device));
  field("ranks", std::to_string(info.ranks));
  field("command", json_quote(info.command));
  field("timing", json_quote(info.timing));
  auto object = [&](const std::vector<std::pair<std::string, std::string>>& kv) {
    std::string o = "{";
    for (std::size_t i = 0; i < kv.size(); ++i)
      o += (i ? ", " : "") + json_quote(kv[i].first) + ": " + json_quote(kv[i].second);
    return o + "}";
  };
  field("settings", object(info.settings));
  field("definitions", object(info.definitions));
  std::string list = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) list += (i ? ",\n    " : "\n    ") + rows[i];
  list += rows.empty() ? "]" : "\n  ]";
  field("rows", list, true);
  out += "}\n";

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
}

}  // namespace gnio::perf
