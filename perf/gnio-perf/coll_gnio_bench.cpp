// gnio-perf coll's plan and run (CollBench's members; the report's are in coll_gnio_report.cpp):
// the settings resolved from the options, the buffers, and for every point one checked call on
// poisoned outputs, warm-up and timed measurements, the slowest rank's figures.
#include "coll_gnio_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"
#include "harness/cuda_graph.hpp"

namespace gnio::perf {
namespace {

/// Poisoned elements behind every checked output (overruns).
constexpr std::size_t kGuardElements = 64;
/// Wrong elements reported in detail per rank and check.
constexpr std::size_t kReportWrong = 4;

}  // namespace

bool gathered(CollKind k) {
  return k == CollKind::ReduceScatter || k == CollKind::AllGather || k == CollKind::AllToAll ||
         k == CollKind::AllToAllV;
}

void CollBench::resolve() {
  Plan& p = plan_;
  const bool gpu = comm_.backend() == Backend::Cuda;
  const bool quick = common_.quick;
  p.on_gpu = gpu;
  p.min_bytes = common_.min_bytes.value_or(gpu || !quick ? 8 : 64);
  p.max_bytes = common_.max_bytes.value_or(gpu ? (quick ? 16ull << 20 : 256ull << 20)
                                               : (quick ? 16ull << 10 : 256ull << 10));
  p.factor = common_.factor.value_or(quick ? (gpu ? 16 : 256) : (gpu ? 2 : 4));
  p.iters = common_.iters.value_or(gpu ? (quick ? 10 : 20) : (quick ? 2 : 5));
  p.warmup = common_.warmup.value_or(gpu ? (quick ? 2 : 5) : 1);
  p.reps = opts_.reps ? opts_.reps : (quick ? (gpu ? 3 : 2) : 5);
  p.budget = gpu ? 4ull << 30 : 16ull << 20;
  if (p.min_bytes == 0) throw UsageError{"-b (smallest size) must be at least 1 byte"};
  if (p.min_bytes > p.max_bytes)
    throw UsageError{"-b " + format_size(p.min_bytes) + " is larger than -e " +
                     format_size(p.max_bytes)};
  if (opts_.root >= comm_.size())
    throw UsageError{"--root " + std::to_string(opts_.root) + " is not a rank of this " +
                     std::to_string(comm_.size()) + "-rank job"};
  if (opts_.graph && *opts_.graph > 0 && !gpu)
    throw Error(ErrorClass::Unsupported,
                "-G " + std::to_string(*opts_.graph) +
                    ": CUDA graphs need the cuda backend; the host backend times eagerly (-G 0)");
  if (opts_.graph && *opts_.graph > 0 && !CudaGraph::available())
    throw Error(ErrorClass::Unsupported, "-G: this gnio-perf was built without CUDA graphs");
  p.graph = opts_.graph.value_or(gpu ? p.iters : 0);
  // The largest size, or one 8-byte element per rank when a size rounds up to that; alltoallv's
  // uneven blocks hold up to 4/3 of the nominal size; the guard sits behind it all.
  const std::uint64_t nominal = std::max<std::uint64_t>(p.max_bytes, 8ull * comm_.size());
  const std::uint64_t largest = nominal + nominal / 3 + 16;
  p.buffer_bytes = (largest + kGuardElements * 8 + 4095) / 4096 * 4096;
}

void CollBench::allocate() {
  for (int i = 0; i < 2; ++i) {
    if (opts_.private_buffers) {
      buf_[i] = priv_[i] = static_cast<char*>(comm_.alloc_device(plan_.buffer_bytes));
    } else {
      sym_[i] = comm_.alloc_bytes(plan_.buffer_bytes);
      buf_[i] = comm_.local(sym_[i]);
    }
    // Never zeros, even where no check wrote: bytes 0x01 are finite values of every type.
    comm_.fill(buf_[i], 0x01, plan_.buffer_bytes, stream_);
  }
  comm_.synchronize(stream_);
  comm_.bootstrap().barrier();
}

std::uint64_t CollBench::sum_over_ranks(std::uint64_t v) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
  all[static_cast<std::size_t>(comm_.rank())] = v;
  comm_.bootstrap().allgather(all.data(), sizeof(std::uint64_t));
  std::uint64_t s = 0;
  for (std::uint64_t x : all) s += x;
  return s;
}

void CollBench::enqueue(const CollCall& c, const void* send, void* recv, bool nccl) {
  if (nccl) {
    nccl_->call(c, send, recv, stream_.cuda());
    return;
  }
  switch (c.kind) {
    case CollKind::AllReduce: allreduce(comm_, send, recv, c.count, c.type, c.op, stream_); break;
    case CollKind::ReduceScatter:
      reduce_scatter(comm_, send, recv, c.count, c.type, c.op, stream_);
      break;
    case CollKind::AllGather: allgather(comm_, send, recv, c.count, c.type, stream_); break;
    case CollKind::Broadcast: broadcast(comm_, send, recv, c.count, c.type, c.root, stream_); break;
    case CollKind::Reduce: reduce(comm_, send, recv, c.count, c.type, c.op, c.root, stream_); break;
    case CollKind::AllToAll: alltoall(comm_, send, recv, c.count, c.type, stream_); break;
    case CollKind::AllToAllV:
      alltoallv(comm_, send, c.send_counts, c.send_displs, recv, c.recv_counts, c.recv_displs,
                c.type, stream_);
      break;
  }
}

/// Compares this rank's checked buffer with `want`: all of it and the guard (gnio), or only the
/// output region (NCCL, as nccl-tests checks it: NCCL promises nothing about the rest of an
/// in-place buffer). Returns the wrong elements and reports the first few on stderr.
std::uint64_t CollBench::check_output(const CollCall& c, const std::vector<std::uint8_t>& want,
                                      bool whole_buffer) {
  const std::size_t es = size_of(c.type);
  std::size_t first = 0, elems = want.size() / es;
  if (!whole_buffer) {
    first = c.in_place ? gnio_bench::in_place_recv_at(c) : 0;
    elems = gnio_bench::recv_elements(c);
    if (c.kind == CollKind::Reduce && c.rank != c.root) elems = 0;
  }
  if (elems == 0) return 0;
  std::vector<std::uint8_t> got(elems * es);
  comm_.copy(got.data(), buf_[1] + first * es, got.size(), stream_);
  comm_.synchronize(stream_);
  const std::uint8_t* w = want.data() + first * es;
  return gnio_bench::count_wrong_elements(
      got.data(), w, got.size(), es, kReportWrong, [&](std::size_t e) {
        std::string g, x;
        char hex[4];
        for (std::size_t b = es; b-- > 0;) {
          std::snprintf(hex, sizeof hex, "%02x", got[e * es + b]);
          g += hex;
          std::snprintf(hex, sizeof hex, "%02x", w[e * es + b]);
          x += hex;
        }
        std::fprintf(stderr,
                     "gnio-perf coll: rank %d: %s %s %s count %zu %s%s: element %zu is 0x%s, "
                     "expected 0x%s%s\n",
                     c.rank, to_string(c.kind), to_string(c.type),
                     gnio_bench::is_reducing(c.kind) ? to_string(c.op) : "-", c.count,
                     c.in_place ? "in place" : "out of place", whole_buffer ? "" : " (NCCL)",
                     first + e, g.c_str(), x.c_str(),
                     first + e >= gnio_bench::checked_elements(c) ? " (guard: overrun)" : "");
      });
}

Side CollBench::run_side(CollCall& c, bool nccl) {
  const std::size_t es = size_of(c.type);
  char* send = c.in_place ? buf_[1] + gnio_bench::in_place_send_at(c) * es : buf_[0];
  char* recv = c.in_place ? buf_[1] + gnio_bench::in_place_recv_at(c) * es : buf_[1];
  Side side;
  side.ran = true;

  // ---- data: exact inputs; with -c 1, one call on poisoned outputs, every element checked ----
  const std::vector<std::uint8_t> input = gnio_bench::make_input(c);
  side.checked = opts_.check && gnio_bench::inputs_exact(c.type, c.op, c.ranks);
  std::uint64_t wrong = 0;
  comm_.bootstrap().barrier();  // no peer still reads or writes these buffers (previous point)
  if (side.checked) {
    const std::vector<std::uint8_t> init = gnio_bench::make_initial(c, input, kGuardElements);
    const std::vector<std::uint8_t> want = gnio_bench::make_expected(c, init);
    if (!c.in_place) comm_.copy(buf_[0], input.data(), input.size(), stream_);
    comm_.copy(buf_[1], init.data(), init.size(), stream_);
    comm_.synchronize(stream_);
    comm_.bootstrap().barrier();  // every rank's buffers are ready before any call reads them
    enqueue(c, send, recv, nccl);
    comm_.synchronize(stream_);
    wrong = check_output(c, want, !nccl);
  } else {
    comm_.copy(c.in_place ? send : buf_[0], input.data(), input.size(), stream_);
    comm_.synchronize(stream_);
  }
  comm_.bootstrap().barrier();

  // ---- warm-up and timed measurements ----
  const std::uint64_t bytes = std::max<std::uint64_t>(1, gnio_bench::checked_elements(c) * es);
  side.iters =
      static_cast<std::uint32_t>(std::clamp<std::uint64_t>(plan_.budget / bytes, 1, plan_.iters));
  auto calls = [&](std::uint32_t k) {
    for (std::uint32_t i = 0; i < k; ++i) enqueue(c, send, recv, nccl);
  };
  std::unique_ptr<CudaGraph> graph;
  std::uint32_t per_launch = 0, launches = 0;
  if (plan_.graph > 0) {
    per_launch = std::min(plan_.graph, side.iters);
    launches = (side.iters + per_launch - 1) / per_launch;
    side.iters = per_launch * launches;
    graph = std::make_unique<CudaGraph>(stream_.cuda(), [&] { calls(per_launch); });
    // At least one replay before timing: the first launch of a graph uploads it.
    const std::uint32_t warm =
        std::max<std::uint32_t>(1, (plan_.warmup + per_launch - 1) / per_launch);
    for (std::uint32_t i = 0; i < warm; ++i) graph->launch();
  } else {
    calls(plan_.warmup);
  }
  comm_.synchronize(stream_);

  std::vector<double> mine;
  for (unsigned r = 0; r < plan_.reps; ++r) {
    comm_.bootstrap().barrier();  // all ranks start together: a call waits for its slowest peer
    double us = 0;
    if (timer_) {
      timer_->start();
      if (graph)
        for (std::uint32_t i = 0; i < launches; ++i) graph->launch();
      else
        calls(side.iters);
      timer_->stop();
      comm_.synchronize(stream_);  // bounded, and reports a device-side stall
      us = timer_->elapsed_us();
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      calls(side.iters);
      comm_.synchronize(stream_);
      us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    mine.push_back(us / side.iters);
  }
  graph.reset();

  // The point's figures are the slowest rank's per measurement; wrong counts are summed.
  const std::size_t n = static_cast<std::size_t>(comm_.size()), reps = mine.size();
  std::vector<double> all(n * reps);
  std::copy(
      mine.begin(), mine.end(),
      all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(comm_.rank()) * reps));
  comm_.bootstrap().allgather(all.data(), reps * sizeof(double));
  std::vector<double> slowest(reps, 0);
  for (std::size_t q = 0; q < n; ++q)
    for (std::size_t r = 0; r < reps; ++r) slowest[r] = std::max(slowest[r], all[q * reps + r]);
  const Stats s = stats_of(slowest);
  side.time_us = s.median;
  side.min_us = s.min;
  side.max_us = s.max;
  side.wrong = sum_over_ranks(wrong);
  return side;
}

Point CollBench::run_point(CollKind k, DataType t, RedOp op, std::size_t count) {
  Point p;
  p.count = count;
  p.algo = coll_hierarchical(comm_, k, count, t) ? "hier"
                                                 : to_string(coll_algorithm(comm_, k, count, t));
  const bool places[2] = {opts_.inplace != 1, opts_.inplace != 0 && k != CollKind::AllToAll &&
                                                  k != CollKind::AllToAllV};
  for (int ip = 0; ip < 2; ++ip) {
    if (!places[ip]) continue;
    CollCall c;
    c.kind = k;
    c.type = t;
    c.op = op;
    c.ranks = comm_.size();
    c.rank = comm_.rank();
    c.count = count;
    c.root = opts_.root;
    c.in_place = ip == 1;
    if (k == CollKind::AllToAllV) gnio_bench::set_alltoallv_layout(c);
    p.gnio[ip] = run_side(c, false);
    if (nccl_ && nccl_->supports(k, t, op)) p.nccl[ip] = run_side(c, true);
  }
  return p;
}

int CollBench::run() {
  resolve();
  // The tables: collective x type x operator (none for the copying collectives).
  struct Table {
    CollKind kind;
    DataType type;
    std::optional<RedOp> op;
  };
  std::vector<Table> tables;
  for (CollKind k : opts_.colls)
    for (DataType t : opts_.types) {
      if (!gnio_bench::is_reducing(k)) {
        tables.push_back({k, t, std::nullopt});
        continue;
      }
      for (RedOp op : opts_.ops)
        if (gnio_bench::type_has_op(t, op)) tables.push_back({k, t, op});
    }
  if (tables.empty())
    throw UsageError{
        "--coll/-d/-o select nothing to measure (bitwise operators need an integer type)"};
  try {
    if (!opts_.algo.empty()) coll_set_algorithm(comm_, opts_.algo);
  } catch (const Error& e) {
    if (e.error_class() != ErrorClass::InvalidArgument) throw;
    throw UsageError{std::string("--algo: ") + e.what()};
  }
  if (plan_.on_gpu) timer_ = std::make_unique<EventTimer>(stream_.cuda());
  if (opts_.vs_nccl) nccl_ = std::make_unique<NcclColl>(comm_);
  allocate();
  // The stream's collective channel is set up now, not inside a graph capture.
  coll_prepare(comm_, stream_);
  const int me = comm_.rank(), n = comm_.size();
  if (me == 0) print_header();

  const std::vector<std::uint64_t> sizes =
      size_steps(plan_.min_bytes, plan_.max_bytes, plan_.factor);
  std::size_t points = 0;
  for (const Table& table : tables) {
    const CollKind k = table.kind;
    const DataType t = table.type;
    const std::optional<RedOp>& op = table.op;
    if (me == 0) print_table_header(k, t, op);
    const std::size_t es = size_of(t);
    const std::size_t per = gathered(k) ? static_cast<std::size_t>(n) : 1;
    std::uint64_t previous = 0;
    for (std::uint64_t s : sizes) {
      const std::size_t count = std::max<std::size_t>(1, s / es / per);
      const std::uint64_t bytes = count * es * per;
      if (bytes == previous) continue;  // rounding made two requested sizes one
      previous = bytes;
      Point p = run_point(k, t, op.value_or(RedOp::Sum), count);
      p.bytes = bytes;
      ++points;
      for (int ip = 0; ip < 2; ++ip) {
        wrong_ += p.gnio[ip].wrong;
        nccl_wrong_ += p.nccl[ip].wrong;
        if (p.gnio[ip].ran && !p.gnio[ip].checked) ++unchecked_;
        if (me == 0 && p.gnio[ip].ran) rows_json_.push_back(row_json(k, t, op, p, ip));
      }
      if (me == 0) print_row(k, t, op, p);
    }
  }

  if (me == 0) {
    if (!common_.json_path.empty()) write_json_rows(common_.json_path, run_info(), rows_json_);
    std::printf("#\n");
    if (unchecked_ && opts_.check)
      std::printf("# %llu results not checked: their inputs are not exact on %d ranks\n",
                  static_cast<unsigned long long>(unchecked_), n);
    if (nccl_wrong_)
      std::printf("# NOTE: NCCL's results differed in %llu elements (not gnio's fault; reported)\n",
                  static_cast<unsigned long long>(nccl_wrong_));
    if (wrong_)
      std::printf("# FAILED: %llu wrong elements in the data checks\n",
                  static_cast<unsigned long long>(wrong_));
    else if (opts_.check)
      std::printf("# all data checks passed (%zu points)\n", points);
    if (!common_.json_path.empty()) std::printf("# wrote %s\n", common_.json_path.c_str());
    std::fflush(stdout);
  }
  comm_.bootstrap().barrier();
  return wrong_ ? kExitWrongData : 0;
}

}  // namespace gnio::perf
