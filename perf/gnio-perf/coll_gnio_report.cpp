// gnio-perf coll's report (CollBench's members; the run's are in coll_gnio_bench.cpp): the header,
// each table's header lines and rows as nccl-tests prints them, the JSON rows and the run's
// description (settings and definitions).
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "coll_gnio_bench.hpp"
#include "gnio/version.hpp"
#include "run_info_gnio.hpp"

namespace gnio::perf {
namespace {

/// nccl-tests' bus bandwidth factor: what each rank's links must carry relative to `size`.
double busbw_factor(CollKind k, int n) {
  if (k == CollKind::AllReduce) return 2.0 * (n - 1) / n;
  if (gathered(k)) return static_cast<double>(n - 1) / n;
  return 1.0;
}

std::string fmt(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Column formats shared by the table's header lines and its rows, so that they line up.
constexpr const char* kKeyColumns = " %12s %12s %7s %6s %5s %8s";
constexpr const char* kSideColumns = " %8s %7s %7s %6s";
constexpr const char* kNcclColumns = " %9s %6s";

}  // namespace

void CollBench::print_table_header(CollKind k, DataType t, std::optional<RedOp> op) const {
  std::string title = std::string(to_string(k)) + "  type=" + to_string(t);
  if (op) title += std::string("  redop=") + to_string(*op);
  if (k == CollKind::Broadcast || k == CollKind::Reduce)
    title += "  root=" + std::to_string(opts_.root);
  char buf[256];
  auto columns = [&](const char* key[6], const char* side[4], const char* nccl[2]) {
    std::snprintf(buf, sizeof buf, kKeyColumns, key[0], key[1], key[2], key[3], key[4], key[5]);
    std::string line = buf;
    for (int i = 0; i < 2; ++i) {
      std::snprintf(buf, sizeof buf, kSideColumns, side[0], side[1], side[2], side[3]);
      line += buf;
      if (nccl_) {
        std::snprintf(buf, sizeof buf, kNcclColumns, nccl[0], nccl[1]);
        line += buf;
      }
    }
    line[0] = '#';
    while (line.back() == ' ') line.pop_back();
    return line;
  };
  const char* names[] = {"size", "count", "type", "redop", "root", "algo"};
  const char* side_names[] = {"time", "algbw", "busbw", "#wrong"};
  const char* nccl_names[] = {"nccl(us)", "ratio"};
  const char* units[] = {"(B)", "(elements)", "", "", "", ""};
  const char* side_units[] = {"(us)", "(GB/s)", "(GB/s)", ""};
  const char* nccl_units[] = {"", ""};
  const std::string names_line = columns(names, side_names, nccl_names);
  const std::string units_line = columns(units, side_units, nccl_units);
  // The placement titles, each centred over its half of the measured columns.
  std::snprintf(buf, sizeof buf, kKeyColumns, "", "", "", "", "", "");
  const std::size_t key_width = std::strlen(buf);
  const std::size_t side_width = (names_line.size() - key_width) / 2;
  std::string placements = "#" + std::string(key_width - 1, ' ');
  for (const char* place : {"out-of-place", "in-place"}) {
    const std::size_t pad = (side_width - std::strlen(place)) / 2;
    placements +=
        std::string(pad, ' ') + place + std::string(side_width - pad - std::strlen(place), ' ');
  }
  while (!placements.empty() && placements.back() == ' ') placements.pop_back();
  std::printf("#\n# %s\n%s\n%s\n%s\n", title.c_str(), placements.c_str(), names_line.c_str(),
              units_line.c_str());
  std::fflush(stdout);
}

void CollBench::print_row(CollKind k, DataType t, std::optional<RedOp> op, const Point& p) const {
  const int root = k == CollKind::Broadcast || k == CollKind::Reduce ? opts_.root : -1;
  std::string line;
  char buf[256];
  std::snprintf(buf, sizeof buf, kKeyColumns, std::to_string(p.bytes).c_str(),
                std::to_string(p.count).c_str(), to_string(t), op ? to_string(*op) : "none",
                std::to_string(root).c_str(), p.algo.c_str());
  line += buf;
  const double factor = busbw_factor(k, comm_.size());
  for (int ip = 0; ip < 2; ++ip) {
    const Side& g = p.gnio[ip];
    if (!g.ran) {
      std::snprintf(buf, sizeof buf, kSideColumns, "n/a", "n/a", "n/a", "n/a");
      line += buf;
    } else {
      const double algbw = g.time_us > 0 ? static_cast<double>(p.bytes) / (g.time_us * 1e3) : 0;
      std::snprintf(buf, sizeof buf, kSideColumns, fmt("%.2f", g.time_us).c_str(),
                    fmt("%.2f", algbw).c_str(), fmt("%.2f", algbw * factor).c_str(),
                    g.checked ? std::to_string(g.wrong).c_str() : "N/A");
      line += buf;
    }
    if (nccl_) {
      const Side& n = p.nccl[ip];
      const bool both = n.ran && g.ran && g.time_us > 0;
      std::snprintf(buf, sizeof buf, kNcclColumns, both ? fmt("%.2f", n.time_us).c_str() : "n/a",
                    both ? fmt("%.2f", n.time_us / g.time_us).c_str() : "n/a");
      line += buf;
    }
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

JsonRow CollBench::row_json(CollKind k, DataType t, std::optional<RedOp> op, const Point& p,
                            int in_place) const {
  const Side& g = p.gnio[in_place];
  const Side& n = p.nccl[in_place];
  const double algbw = g.time_us > 0 ? static_cast<double>(p.bytes) / (g.time_us * 1e3) : 0;
  const bool rooted = k == CollKind::Broadcast || k == CollKind::Reduce;
  // A figure, or null where it was not measured.
  auto figure = [](bool measured, double v) {
    return measured ? JsonValue{table_digits(v)} : nullptr;
  };
  auto count = [](bool measured, std::uint64_t v) { return measured ? JsonValue{v} : nullptr; };
  return {{"coll", to_string(k)},
          {"type", to_string(t)},
          {"op", op ? JsonValue{std::string(to_string(*op))} : nullptr},
          {"root", std::int64_t{rooted ? opts_.root : -1}},
          {"inplace", std::int64_t{in_place}},
          {"algo", p.algo},
          {"bytes", std::uint64_t{p.bytes}},
          {"count", std::uint64_t{p.count}},
          {"iters", std::uint64_t{g.iters}},
          {"time_us", table_digits(g.time_us)},
          {"min_us", table_digits(g.min_us)},
          {"max_us", table_digits(g.max_us)},
          {"algbw", table_digits(algbw)},
          {"busbw", table_digits(algbw * busbw_factor(k, comm_.size()))},
          {"wrong", count(g.checked, g.wrong)},
          {"nccl_time_us", figure(n.ran, n.time_us)},
          {"ratio", figure(n.ran, g.time_us > 0 ? n.time_us / g.time_us : 0)},
          {"nccl_wrong", count(n.ran && n.checked, n.wrong)}};
}

RunInfo CollBench::run_info() const {
  RunInfo info = gnio_run_info(comm_, "coll", common_.command_line);
  info.timing = plan_.graph > 0 ? "graph" : "eager";
  const Plan& p = plan_;
  info.settings = {{"min_bytes", std::to_string(p.min_bytes)},
                   {"max_bytes", std::to_string(p.max_bytes)},
                   {"factor", std::to_string(p.factor)},
                   {"iters", std::to_string(p.iters)},
                   {"warmup", std::to_string(p.warmup)},
                   {"graph_calls", std::to_string(p.graph)},
                   {"reps", std::to_string(p.reps)},
                   {"budget_bytes", std::to_string(p.budget)},
                   {"check", opts_.check ? "1" : "0"},
                   {"algo", algo_label()},
                   {"inplace", std::to_string(opts_.inplace)},
                   {"root", std::to_string(opts_.root)},
                   {"mem", opts_.private_buffers ? "priv" : "sym"},
                   {"nccl", nccl_ ? nccl_->description() : ""},
                   {"quick", common_.quick ? "1" : "0"}};
  info.definitions = {
      {"bytes",
       "nccl-tests' size: bytes of the larger per-rank buffer (allreduce, broadcast, reduce: "
       "count*elem; reduce_scatter: nranks*recvcount*elem; allgather: nranks*sendcount*elem; "
       "alltoall: nranks*count*elem; alltoallv: alltoall's nominal size, per-pair counts 2/3, 1 "
       "or 4/3 of count)"},
      {"count", "the count argument of the call (per rank; per peer for alltoall(v))"},
      {"time_us",
       "per call: the slowest rank's time of a measurement of iters calls divided by iters, "
       "median over reps measurements (min_us, max_us: their extremes)"},
      {"timing", plan_.graph > 0 ? "graph: graph_calls calls captured in one CUDA graph, "
                                   "replayed iters/graph_calls times per measurement; CUDA events"
                                 : (p.on_gpu ? "eager: iters calls enqueued one by one per "
                                               "measurement; CUDA events"
                                             : "eager: iters calls enqueued one by one per "
                                               "measurement; steady clock around enqueue + "
                                               "synchronize")},
      {"algbw", "bytes / time_us, 1 GB = 1e9 bytes"},
      {"busbw",
       "algbw * nccl-tests' factor: allreduce 2(n-1)/n; reduce_scatter, allgather, "
       "alltoall(v) (n-1)/n; broadcast, reduce 1"},
      {"wrong",
       "elements differing from the exact expected result, summed over ranks (null: not "
       "checked); the whole output buffer and a 64-element guard behind it are checked"},
      {"ratio", "nccl_time_us / time_us: > 1 means gnio is faster"}};
  return info;
}

void CollBench::print_header() const {
  const Plan& p = plan_;
  std::printf("# %s coll: gnio %s, backend %s, %d ranks, %s buffers\n", common_.program.c_str(),
              version_string(), to_string(comm_.backend()), comm_.size(),
              opts_.private_buffers ? "private (staged)" : "symmetric-heap (zero-copy)");
  std::printf("# device: %s\n", comm_.device_description().c_str());
  if (nccl_) std::printf("# NCCL: %s, same buffers and stream\n", nccl_->description().c_str());
  if (p.graph > 0)
    std::printf(
        "# timing: graph - %u calls captured in one CUDA graph, replayed; CUDA events around\n"
        "#   up to %u calls per measurement; time = per call, slowest rank, median of %u\n",
        p.graph, p.iters, p.reps);
  else
    std::printf(
        "# timing: eager - up to %u calls enqueued one by one per measurement, timed with %s;\n"
        "#   time = per call, slowest rank, median of %u%s\n",
        p.iters, p.on_gpu ? "CUDA events" : "a steady clock", p.reps,
        p.on_gpu ? "" : " (host backend: for checking, not speed)");
  std::printf("# sizes %s .. %s (x%llu), %u warm-up calls, algorithm %s\n",
              format_size(p.min_bytes).c_str(), format_size(p.max_bytes).c_str(),
              static_cast<unsigned long long>(p.factor), p.warmup, algo_label().c_str());
  std::printf(
      "# size: bytes of the larger per-rank buffer (nccl-tests); algbw = size / time;\n"
      "#   busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (reduce_scatter, allgather,\n"
      "#   alltoall(v)), 1 (broadcast, reduce); 1 GB = 1e9 B\n");
  std::printf("# #wrong: %s\n", opts_.check ? "every element of every rank checked once per point, "
                                              "summed over ranks (N/A: not checked)"
                                            : "not checked (-c 0)");
  if (nccl_) std::printf("# ratio = nccl time / gnio time (> 1: gnio faster)\n");
  std::fflush(stdout);
}

}  // namespace gnio::perf
