// Results of a benchmark run: the rows, the nccl-tests-like tables printed while it runs, and the
// JSON file written at the end (the format bench/compare.py reads).
//
// JSON layout (one object):
//   { "schema": "gnio-perf/1", "library": "gnio"|"nvshmem", "subcommand": "rma",
//     "version", "date" (UTC, ISO 8601), "host", "backend", "device", "ranks", "command",
//     "timing": "eager"|"graph", "settings": {name: value, ...}, "definitions": {mode: text, ...},
//     "rows": [ {"op", "scope", "mode", "bytes", "iters", "median_us", "min_us", "max_us",
//                "gbps", "wrong"}, ... ] }
// median_us/min_us/max_us are per operation (see the subcommand's definitions); gbps is computed
// from median_us with 1 GB = 1e9 bytes. Subcommands with other figures (coll) write their own
// row objects (JsonRow) through write_json_rows; everything around the rows is the same.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gnio::perf {

/// One measured point.
struct Row {
  std::string op;
  std::string scope;
  std::string mode;
  std::uint64_t bytes = 0;  ///< message size
  std::uint32_t iters = 0;  ///< operations per timed launch
  double median_us = 0;     ///< per operation, median over the timed launches
  double min_us = 0;
  double max_us = 0;
  double gbps = 0;          ///< bytes moved per second at the median, 1e9 B/s units
  std::uint64_t wrong = 0;  ///< wrong bytes (or values) found by the data check, all ranks
  /// busbw / algbw in the table: 1 for one pair (every byte crosses one link); a collective's
  /// nccl-tests factor otherwise (allreduce 2(n-1)/n).
  double bus_factor = 1.0;
};

/// What the JSON metadata and the table header say about the run.
struct RunInfo {
  std::string library;     ///< "gnio" or "nvshmem"
  std::string subcommand;  ///< "rma"
  std::string version;     ///< the library's version
  std::string backend;     ///< "cuda" or "host"
  std::string device;      ///< one line describing rank 0's device
  int ranks = 0;
  std::string command;
  std::string timing = "eager";                                  ///< "eager" or "graph"
  std::vector<std::pair<std::string, std::string>> settings;     ///< numbers, as text
  std::vector<std::pair<std::string, std::string>> definitions;  ///< what each figure means
};

/// Median, minimum and maximum of `v` (which it reorders). All 0 for an empty vector.
struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double>& v);

/// Prints tables like nccl-tests: a title line per table, a header, then one line per row.
class TablePrinter {
 public:
  explicit TablePrinter(std::FILE* out) : out_(out) {}
  /// Starts a table: `title` (e.g. "put  scope=block  mode=bw") and what its time column means.
  void begin(const std::string& title, const std::string& time_meaning);
  void row(const Row& r);
  void end();

 private:
  std::FILE* out_;
};

/// The current UTC date and time, ISO 8601 ("2026-11-30T12:34:56Z").
std::string utc_timestamp();
/// This machine's host name.
std::string host_name();

/// `v` rounded to the 6 significant digits a figure keeps in the JSON file (enough for what the
/// tables show). NaN and infinity stay as they are: the file has null for them (JSON has neither).
double table_digits(double v);

/// A value of a JSON row: null, text, a whole number, a figure (round it with table_digits) or a
/// flag.
using JsonValue =
    std::variant<std::nullptr_t, std::string, std::int64_t, std::uint64_t, double, bool>;
/// One row object of the JSON file: its keys and values, in the order written.
using JsonRow = std::vector<std::pair<std::string, JsonValue>>;

/// Writes `info` and `rows` as JSON to `path`, atomically (a temporary file renamed into place).
/// Throws std::runtime_error naming the file on failure. The JSON is nlohmann-json's, in
/// report.cpp only (its header costs seconds per file that includes it).
void write_json_rows(const std::string& path, const RunInfo& info,
                     const std::vector<JsonRow>& rows);
/// Writes `rows` and `info` as JSON to `path` (atomically: a temporary file renamed into place).
/// Throws std::runtime_error naming the file when it cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace gnio::perf
