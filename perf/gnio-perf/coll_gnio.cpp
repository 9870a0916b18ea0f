// gnio-perf coll: nccl-tests-style benchmark of gnio's stream-ordered collectives (gnio/coll.hpp),
// optionally side by side with NCCL (--vs-nccl, coll_nccl.hpp).
//
//   gnio-run -n 2 -- gnio-perf coll [--coll allreduce] [-d f32] [-o sum] [-b 8] [-e 256M] ...
//
// For every collective x type x operator (a table each) and size (a row each), out of place and in
// place side by side as nccl-tests prints them:
//  * size   nccl-tests' "size": bytes of the larger of the rank's two buffers (allreduce,
//           broadcast, reduce: count x elem; reduce_scatter: the send buffer, n x recvcount x elem;
//           allgather: the recv buffer, n x sendcount x elem; alltoall: n x count x elem per
//           buffer; alltoallv: alltoall's, the nominal figure its uneven counts average to).
//           Requested sizes are rounded down to whole counts (at least 1 element per rank).
//  * count  the count the call takes (NCCL's convention: per rank, per peer for alltoall).
//  * time   per call, the slowest rank's, median over --reps timed measurements of `iters` calls
//           each: a CUDA graph of -G calls replayed (graph), or the calls enqueued one by one
//           (eager), timed with CUDA events (a steady clock on the host backend).
//  * algbw  size / time; busbw = algbw x nccl-tests' factor: allreduce 2(n-1)/n; reduce_scatter,
//           allgather, alltoall(v) (n-1)/n; broadcast, reduce 1. 1 GB = 1e9 bytes.
//  * #wrong elements that differ from the exact expected result (perf/harness/coll_data.hpp),
//           summed over ranks: before timing, each point runs once on poisoned outputs (plus a
//           guard), every element of every rank checked. Any wrong element makes the exit status 1.
// This file is host code only (plain C++): kernels are gnio's, graphs and events are in
// cuda_graph.cpp and event_timer.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coll_nccl.hpp"
#include "harness/coll_data.hpp"
#include "harness/cuda_graph.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "gnio/stream.hpp"
#include "gnio/version.hpp"
#include "harness/report.hpp"
#include "run_info_gnio.hpp"

namespace gnio::perf {
namespace {

using gnio_bench::CollCall;

/// Poisoned elements behind every checked output (overruns).
constexpr std::size_t kGuardElements = 64;
/// Wrong elements reported in detail per rank and check.
constexpr std::size_t kReportWrong = 4;

/// Options of the coll subcommand, as parsed from the command line.
struct CollOptions {
  std::vector<CollKind> colls;
  std::vector<DataType> types;
  std::vector<RedOp> ops;
  std::string algo;  ///< --algo, handed to coll_set_algorithm; empty: GNIO_ALGO's (auto by default)
  int inplace = 2;   ///< --inplace: 0 out of place, 1 in place, 2 both
  int root = 0;      ///< --root
  bool check = true;                   ///< -c
  std::optional<std::uint32_t> graph;  ///< -G: calls per graph launch (0: eager)
  unsigned reps = 0;                   ///< --reps (0: default)
  bool private_buffers = false;        ///< --mem priv
  bool vs_nccl = false;                ///< --vs-nccl
};

// ---- names ----

template <class T>
struct Named {
  const char* name;
  std::vector<T> values;
};

/// Parses a comma-separated list of names into values (duplicates dropped, order kept).
template <class T>
std::vector<T> parse_names(const std::string& text, const char* option,
                           const std::vector<Named<T>>& names) {
  std::vector<T> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string word =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const auto it =
        std::find_if(names.begin(), names.end(), [&](const Named<T>& n) { return word == n.name; });
    if (it == names.end()) {
      std::string choices;
      for (const Named<T>& n : names) choices += std::string(choices.empty() ? "" : "|") + n.name;
      throw UsageError{std::string(option) + ": '" + word + "' is not one of " + choices};
    }
    for (T v : it->values)
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

const std::vector<Named<CollKind>>& coll_names() {
  static const std::vector<Named<CollKind>> names = [] {
    std::vector<Named<CollKind>> v;
    std::vector<CollKind> all;
    for (int i = 0; i < kCollKindCount; ++i) {
      const auto k = static_cast<CollKind>(i);
      v.push_back({to_string(k), {k}});
      all.push_back(k);
    }
    v.push_back({"all", all});
    return v;
  }();
  return names;
}

const std::vector<Named<DataType>>& type_names() {
  // gnio's names, then nccl-tests' (-d float, half, ...).
  static const std::vector<Named<DataType>> names = [] {
    std::vector<Named<DataType>> v;
    for (DataType t : gnio_bench::kAllTypes) v.push_back({to_string(t), {t}});
    v.insert(v.end(), {{"float", {DataType::F32}},
                       {"half", {DataType::F16}},
                       {"bfloat16", {DataType::BF16}},
                       {"double", {DataType::F64}},
                       {"int32", {DataType::I32}},
                       {"int", {DataType::I32}},
                       {"int64", {DataType::I64}},
                       {"uint8", {DataType::U8}},
                       {"fp8_e4m3", {DataType::F8E4M3}},
                       {"fp8_e5m2", {DataType::F8E5M2}}});
    v.push_back({"all", {std::begin(gnio_bench::kAllTypes), std::end(gnio_bench::kAllTypes)}});
    return v;
  }();
  return names;
}

const std::vector<Named<RedOp>>& op_names() {
  static const std::vector<Named<RedOp>> names = [] {
    std::vector<Named<RedOp>> v;
    std::vector<RedOp> all;
    for (int i = 0; i < kRedOpCount; ++i) {
      const auto op = static_cast<RedOp>(i);
      v.push_back({to_string(op), {op}});
      all.push_back(op);
    }
    v.insert(v.end(),
             {{"band", {RedOp::BitAnd}}, {"bor", {RedOp::BitOr}}, {"bxor", {RedOp::BitXor}}});
    v.push_back({"all", all});
    return v;
  }();
  return names;
}

/// Checks the words of an --algo spec (auto|ll|oneshot|twoshot|ring, or collective:algorithm),
/// so that a typo is a usage error before any communicator exists. Whether a collective has the
/// algorithm it is paired with is coll_set_algorithm's to say.
void check_algo_spec(const std::string& spec) {
  std::vector<Named<int>> algos;
  for (int i = 0; i < kCollAlgoCount; ++i)
    algos.push_back({to_string(static_cast<CollAlgo>(i)), {i}});
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = spec.find(',', pos);
    const std::string word =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = word.find(':');
    if (colon != std::string::npos) {
      std::vector<Named<int>> colls;
      for (int i = 0; i < kCollKindCount; ++i)
        colls.push_back({to_string(static_cast<CollKind>(i)), {i}});
      parse_names(word.substr(0, colon), "--algo (collective)", colls);
      parse_names(word.substr(colon + 1), "--algo", algos);
    } else {
      parse_names(word, "--algo", algos);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

CollOptions parse_coll_options(CommonOptions& common, int argc, char** argv, int first) {
  CollOptions o;
  o.colls = parse_names<CollKind>("all", "--coll", coll_names());
  o.types = {DataType::F32};
  o.ops = {RedOp::Sum};
  ArgReader reader(argc, argv, first);
  while (!reader.done()) {
    const std::string arg = reader.next();
    if (parse_common_option(arg, reader, common)) continue;
    if (arg == "--coll") {
      o.colls = parse_names(reader.value(arg), "--coll", coll_names());
    } else if (arg == "-d" || arg == "--datatype") {
      o.types = parse_names(reader.value(arg), "-d (type)", type_names());
    } else if (arg == "-o" || arg == "--op") {
      o.ops = parse_names(reader.value(arg), "-o (operator)", op_names());
    } else if (arg == "-c" || arg == "--check") {
      o.check = parse_count(reader.value(arg), "-c (check)", 1) != 0;
    } else if (arg == "-G" || arg == "--cudagraph") {
      o.graph = static_cast<std::uint32_t>(
          parse_count(reader.value(arg), "-G (calls per graph launch)", 1u << 20));
    } else if (arg == "--algo") {
      o.algo = reader.value(arg);
      check_algo_spec(o.algo);
    } else if (arg == "--inplace") {
      o.inplace = static_cast<int>(parse_count(reader.value(arg), "--inplace", 2));
    } else if (arg == "--root") {
      o.root = static_cast<int>(parse_count(reader.value(arg), "--root", 1u << 20));
    } else if (arg == "--reps") {
      o.reps = static_cast<unsigned>(parse_count(reader.value(arg), "--reps", 1000));
      if (!o.reps) throw UsageError{"--reps must be at least 1"};
    } else if (arg == "--mem") {
      const std::string m = reader.value(arg);
      if (m != "sym" && m != "priv") throw UsageError{"--mem: '" + m + "' is not one of sym|priv"};
      o.private_buffers = m == "priv";
    } else if (arg == "--vs-nccl") {
      o.vs_nccl = true;
    } else {
      throw UsageError{"unknown option '" + arg + "'"};
    }
  }
  return o;
}

void print_coll_usage(std::FILE* out) {
  std::fprintf(
      out,
      "  --coll LIST    allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall,\n"
      "                 alltoallv, all [all]\n"
      "  -d LIST        element types: f32 f16 bf16 f64 i32 i64 u8 f8e4m3 f8e5m2 (or nccl-tests'\n"
      "                 float half bfloat16 double int32 int64 uint8), all [f32]\n"
      "  -o LIST        operators: sum prod min max and or xor, all [sum]; bitwise ones run on\n"
      "                 the integer types only\n"
      "  -c 0|1         check every element of every result once per point [1]\n"
      "  -G N           calls captured per CUDA graph launch; 0 = eager (calls enqueued one by\n"
      "                 one) [GPU: 20 (quick: 10); host backend: 0, the only choice]\n"
      "  --algo SPEC    auto, ll, oneshot, twoshot, ring, or a comma list of them and of\n"
      "                 collective:algorithm pairs (as GNIO_ALGO) [GNIO_ALGO, else auto]\n"
      "  --inplace N    0 out of place, 1 in place, 2 both [2] (alltoall(v): out of place only)\n"
      "  --root R       root of broadcast and reduce [0]\n"
      "  --reps N       timed measurements per point; time is their median [5]\n"
      "  --mem sym|priv buffers in the symmetric heap (zero-copy) or private device memory\n"
      "                 (staged through gnio's symmetric staging) [sym]\n"
      "  --vs-nccl      also time NCCL (libnccl loaded at run time) on the same buffers: adds\n"
      "                 nccl(us) and ratio = nccl time / gnio time (> 1: gnio faster); GPUs only\n"
      "  LIST is comma-separated. Defaults: GPU -b 8 -e 256M -f 2 -n 20 -w 5; host backend\n"
      "  -b 8 -e 256K -f 4 -n 5 -w 1. --quick: GPU -e 16M -f 16 -n 10 -w 2; host backend -b 64\n"
      "  -e 16K -f 256 -n 2 -w 1 --reps 2. Large sizes run fewer calls per measurement (at most\n"
      "  4 GiB moved on a GPU, 16 MiB on the host backend; at least 1 call).\n");
}

// ---- the run ----

/// Settings resolved from the options and the backend's defaults.
struct Plan {
  std::uint64_t min_bytes, max_bytes, factor;
  std::uint32_t iters, warmup, graph;
  unsigned reps;
  std::uint64_t budget;  ///< bytes one measurement may move (size x calls)
  std::uint64_t buffer_bytes;
  bool on_gpu;
};

/// What one side (gnio or NCCL, out of place or in place) of one point measured.
struct Side {
  bool ran = false;
  bool checked = false;
  std::uint32_t iters = 0;
  double time_us = 0, min_us = 0, max_us = 0;
  std::uint64_t wrong = 0;
};

/// One row: a size of one table, both placements, gnio and (optionally) NCCL.
struct Point {
  std::uint64_t bytes = 0;
  std::size_t count = 0;
  std::string algo;
  Side gnio[2], nccl[2];  // [in_place]
};

bool gathered(CollKind k) {
  return k == CollKind::ReduceScatter || k == CollKind::AllGather || k == CollKind::AllToAll ||
         k == CollKind::AllToAllV;
}

/// nccl-tests' bus bandwidth factor: what each rank's links must carry relative to `size`.
double busbw_factor(CollKind k, int n) {
  if (k == CollKind::AllReduce) return 2.0 * (n - 1) / n;
  if (gathered(k)) return static_cast<double>(n - 1) / n;
  return 1.0;
}

std::vector<std::uint64_t> size_steps(std::uint64_t lo, std::uint64_t hi, std::uint64_t factor) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = lo; s <= hi; s *= factor) {
    v.push_back(s);
    if (s > hi / factor) break;  // the next step would overflow or pass hi
  }
  return v;
}

class CollBench {
 public:
  CollBench(const CommonOptions& common, const CollOptions& opts)
      : common_(common), opts_(opts), comm_(Comm::from_env()), stream_(comm_) {}

  ~CollBench() {
    nccl_.reset();  // before the buffers and the communicator it runs on
    try {
      if (opts_.private_buffers) {
        for (char* p : priv_)
          if (p) comm_.free_device(p);
      }
    } catch (...) {
    }
  }

  int run();

 private:
  void resolve();
  void allocate();
  void print_header() const;
  void print_table_header(CollKind k, DataType t, std::optional<RedOp> op) const;
  void print_row(CollKind k, DataType t, std::optional<RedOp> op, const Point& p) const;
  Point run_point(CollKind k, DataType t, RedOp op, std::size_t count);
  Side run_side(CollCall& c, bool nccl);
  void enqueue(const CollCall& c, const void* send, void* recv, bool nccl);
  std::uint64_t check_output(const CollCall& c, const std::vector<std::uint8_t>& want,
                             bool whole_buffer);
  std::string row_json(CollKind k, DataType t, std::optional<RedOp> op, const Point& p,
                       int in_place) const;
  RunInfo run_info() const;
  /// The algorithm spec in force: --algo's, else GNIO_ALGO's, else "auto".
  std::string algo_label() const {
    if (!opts_.algo.empty()) return opts_.algo;
    return config_is_set("GNIO_ALGO") ? "GNIO_ALGO=" + config_text("GNIO_ALGO") : "auto";
  }
  std::uint64_t sum_over_ranks(std::uint64_t v);

  const CommonOptions& common_;
  const CollOptions& opts_;
  Comm comm_;
  Stream stream_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<NcclColl> nccl_;
  Plan plan_{};
  SymPtr<char> sym_[2];
  char* priv_[2] = {};
  char* buf_[2] = {};  // [0] send (out of place), [1] recv or the in-place buffer
  std::vector<std::string> rows_json_;
  std::uint64_t wrong_ = 0, nccl_wrong_ = 0, unchecked_ = 0;
};

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

std::string fmt(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Column formats shared by the table's header lines and its rows, so that they line up.
constexpr const char* kKeyColumns = " %12s %12s %7s %6s %5s %8s";
constexpr const char* kSideColumns = " %8s %7s %7s %6s";
constexpr const char* kNcclColumns = " %9s %6s";

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

std::string CollBench::row_json(CollKind k, DataType t, std::optional<RedOp> op, const Point& p,
                                int in_place) const {
  const Side& g = p.gnio[in_place];
  const Side& n = p.nccl[in_place];
  const double algbw = g.time_us > 0 ? static_cast<double>(p.bytes) / (g.time_us * 1e3) : 0;
  const bool rooted = k == CollKind::Broadcast || k == CollKind::Reduce;
  std::string o =
      "{\"coll\": " + json_quote(to_string(k)) + ", \"type\": " + json_quote(to_string(t)) +
      ", \"op\": " + (op ? json_quote(to_string(*op)) : "null") +
      ", \"root\": " + std::to_string(rooted ? opts_.root : -1) +
      ", \"inplace\": " + std::to_string(in_place) + ", \"algo\": " + json_quote(p.algo) +
      ", \"bytes\": " + std::to_string(p.bytes) + ", \"count\": " + std::to_string(p.count) +
      ", \"iters\": " + std::to_string(g.iters) + ", \"time_us\": " + json_number(g.time_us) +
      ", \"min_us\": " + json_number(g.min_us) + ", \"max_us\": " + json_number(g.max_us) +
      ", \"algbw\": " + json_number(algbw) +
      ", \"busbw\": " + json_number(algbw * busbw_factor(k, comm_.size())) +
      ", \"wrong\": " + (g.checked ? std::to_string(g.wrong) : "null");
  if (n.ran) {
    o += ", \"nccl_time_us\": " + json_number(n.time_us) +
         ", \"ratio\": " + json_number(g.time_us > 0 ? n.time_us / g.time_us : 0) +
         ", \"nccl_wrong\": " + (n.checked ? std::to_string(n.wrong) : "null");
  } else {
    o += ", \"nccl_time_us\": null, \"ratio\": null, \"nccl_wrong\": null";
  }
  return o + "}";
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

int run_coll(CommonOptions& common, int argc, char** argv, int first) {
  // Options first: a bad command line fails on every rank before any communicator exists.
  const CollOptions opts = parse_coll_options(common, argc, argv, first);
  CollBench bench(common, opts);
  return bench.run();
}

const SubcommandRegistrar kRegisterColl({"coll",
                                         "collectives (allreduce, reduce_scatter, allgather, "
                                         "broadcast, reduce, alltoall(v)) over all ranks, "
                                         "nccl-tests style; --vs-nccl beside NCCL",
                                         print_coll_usage, run_coll});

}  // namespace
}  // namespace gnio::perf
