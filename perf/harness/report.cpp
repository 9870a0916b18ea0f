#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gnio::perf {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written

/// One value of the file: compact, bytes that are not UTF-8 replaced (U+FFFD).
std::string dump(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// The file's layout: one top-level key per line and one element per line in arrays of objects
/// (the rows), so that files stay readable and diff by row.
std::string layout(const Json& doc) {
  std::string out = "{\n";
  std::size_t left = doc.size();
  for (const auto& [key, value] : doc.items()) {
    out += "  " + dump(key) + ": ";
    if (value.is_array() && !value.empty() && value.front().is_object()) {
      for (std::size_t i = 0; i < value.size(); ++i)
        out += (i ? ",\n    " : "[\n    ") + dump(value[i]);
      out += "\n  ]";
    } else {
      out += dump(value);
    }
    out += --left ? ",\n" : "\n";
  }
  return out + "}\n";
}

/// A row as a JSON object, keys in their order.
Json to_json(const JsonRow& row) {
  Json o = Json::object();
  for (const auto& [key, value] : row)
    o[key] = std::visit([](const auto& v) { return Json(v); }, value);
  return o;
}

}  // namespace

double table_digits(double v) {
  if (!std::isfinite(v)) return v;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return std::strtod(buf, nullptr);
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
  std::vector<JsonRow> objects;
  objects.reserve(rows.size());
  for (const Row& r : rows)
    objects.push_back({{"op", r.op},
                       {"scope", r.scope},
                       {"mode", r.mode},
                       {"bytes", r.bytes},
                       {"iters", std::uint64_t{r.iters}},
                       {"median_us", table_digits(r.median_us)},
                       {"min_us", table_digits(r.min_us)},
                       {"max_us", table_digits(r.max_us)},
                       {"gbps", table_digits(r.gbps)},
                       {"wrong", r.wrong}});
  write_json_rows(path, info, objects);
}

void write_json_rows(const std::string& path, const RunInfo& info,
                     const std::vector<JsonRow>& rows) {
  auto object = [](const std::vector<std::pair<std::string, std::string>>& kv) {
    Json o = Json::object();
    for (const auto& [key, value] : kv) o[key] = value;
    return o;
  };
  Json doc = {{"schema", "gnio-perf/1"},
              {"library", info.library},
              {"subcommand", info.subcommand},
              {"version", info.version},
              {"date", utc_timestamp()},
              {"host", host_name()},
              {"backend", info.backend},
              {"device", info.device},
              {"ranks", info.ranks},
              {"command", info.command},
              {"timing", info.timing},
              {"settings", object(info.settings)},
              {"definitions", object(info.definitions)},
              {"rows", Json::array()}};
  for (const JsonRow& row : rows) doc["rows"].push_back(to_json(row));
  const std::string out = layout(doc);

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
