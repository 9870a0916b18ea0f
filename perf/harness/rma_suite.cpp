#include "rma_suite.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "report.hpp"

namespace gnio::perf {

const char* to_string(RmaOp op) {
  switch (op) {
    case RmaOp::Put: return "put";
    case RmaOp::Get: return "get";
    case RmaOp::PutSignal: return "put_signal";
    case RmaOp::FetchAdd: return "fetch_add";
    case RmaOp::CompareSwap: return "compare_swap";
  }
  return "?";
}
const char* to_string(Scope s) {
  switch (s) {
    case Scope::Thread: return "thread";
    case Scope::Warp: return "warp";
    case Scope::Block: return "block";
  }
  return "?";
}
const char* to_string(Mode m) {
  switch (m) {
    case Mode::Lat: return "lat";
    case Mode::Bw: return "bw";
    case Mode::Bibw: return "bibw";
  }
  return "?";
}

namespace {

/// Value the atomics' target word starts from; far below 2^63 so the kernels' increments (whose
/// dependence on the previous result relies on the top bit being clear) never overflow.
constexpr std::uint64_t kAtomicStart = 0x0123456789ABCDEFull;
/// Atomics run this many operations in their data-check launch.
constexpr std::uint32_t kAtomicCheckIters = 64;

/// Settings resolved from the options and the backend's defaults.
struct Plan {
  std::uint64_t min_bytes, max_bytes, factor, lat_max;
  std::uint32_t iters, warmup, min_lat_iters;
  unsigned reps, blocks, threads;
  /// Latency launches run min(iters, lat_budget / S) operations (at least min_lat_iters), and
  /// bandwidth launches min(iters, bw_budget / S) repetitions (at least 1), so a launch lasts
  /// long enough to time and a 1 GiB message does not take minutes.
  std::uint64_t lat_budget, bw_budget;
  /// Bytes of each per-rank buffer (beyond the largest message: room for the get windows and
  /// the guard).
  std::uint64_t buffer_bytes;
  SignalLayout signals;
};

struct Case {
  RmaOp op;
  Scope scope;
  Mode mode;
};

unsigned group_threads(Scope s, unsigned block_threads) {
  return s == Scope::Thread ? 1u : s == Scope::Warp ? 32u : block_threads;
}

std::string time_meaning(const Case& c) {
  if (c.mode == Mode::Bw)
    return "per repetition of the whole message, rank 0 -> rank 1, all groups at once; GB/s = "
           "S/time";
  if (c.mode == Mode::Bibw)
    return "per repetition, both ranks sending at once (the slower rank's time); GB/s = 2*S/time";
  switch (c.op) {
    case RmaOp::Put: return "per put(S) + quiet() of one group: issue to completion";
    case RmaOp::Get: return "per blocking get(S) of one group (each from a fresh window)";
    case RmaOp::PutSignal:
      return "one way = round trip / 2 of a put_signal(S) ping-pong between rank 0 and rank 1";
    case RmaOp::FetchAdd: return "per remote 64-bit fetch_add round trip (one thread)";
    case RmaOp::CompareSwap: return "per remote 64-bit compare_swap round trip (one thread)";
  }
  return "";
}

/// Runs the measurements; one instance per run.
class Suite {
 public:
  Suite(RmaLibrary& lib, const CommonOptions& common, const RmaOptions& opts)
      : lib_(lib), common_(common), opts_(opts), me_(lib.rank()) {}

  int run();

 private:
  void resolve();
  std::vector<Case> cases() const;
  void print_header(const std::vector<Case>& cases) const;
  Row run_point(const Case& c, std::uint64_t bytes);
  /// Runs one launch (or the pair of a ping-pong / bibw) and returns rank 0's view of its time
  /// in microseconds (the slower rank's for bibw). Every rank calls it.
  double orchestrate(RmaLaunch l, bool timed, bool pingpong, bool both);
  RmaLaunch make_launch(const Case& c, std::uint64_t bytes, std::uint32_t iters) const;
  std::uint32_t iterations(const Case& c, std::uint64_t bytes) const;
  RunInfo run_info() const;

  RmaLibrary& lib_;
  const CommonOptions& common_;
  const RmaOptions& opts_;
  const int me_;
  Plan plan_{};
  std::uint64_t serial_ = 0;       // one per measured point: makes every point's data unique
  std::uint64_t signal_base_ = 0;  // signal values used so far (monotonic: no resets needed)
  std::uint64_t atomic_value_ = kAtomicStart;
  std::vector<Row> rows_;
};

void Suite::resolve() {
  const bool gpu = lib_.on_gpu();
  const bool quick = common_.quick;
  Plan& p = plan_;
  p.min_bytes = common_.min_bytes.value_or(8);
  p.max_bytes = common_.max_bytes.value_or(gpu ? (quick ? 64ull << 20 : 1ull << 30)
                                               : (quick ? 64ull << 10 : 1ull << 20));
  p.factor = common_.factor.value_or(quick ? (gpu ? 16 : 64) : 2);
  p.iters = common_.iters.value_or(gpu ? (quick ? 100 : 1000) : (quick ? 5 : 20));
  p.warmup = common_.warmup.value_or(gpu ? (quick ? 10 : 50) : (quick ? 1 : 2));
  p.reps = opts_.reps ? opts_.reps : (quick ? 3 : 5);
  p.lat_max = opts_.lat_max ? opts_.lat_max : 1ull << 20;
  p.blocks = opts_.blocks ? opts_.blocks : lib_.default_blocks();
  p.threads = opts_.threads ? opts_.threads : lib_.default_threads();
  p.min_lat_iters = std::min<std::uint32_t>(p.iters, gpu ? 5 : 2);
  p.lat_budget = gpu ? 2ull << 20 : 64ull << 10;
  // Several puts of a large message per launch on the host backend too: with one, a 16 MiB put
  // waited for each one's ack before the next (send, drain, ack, launch), a latency rather than a
  // bandwidth.
  p.bw_budget = gpu ? 256ull << 20 : 64ull << 20;
  if (p.min_bytes == 0) throw UsageError{"-b (smallest message) must be at least 1 byte"};
  if (p.min_bytes > p.max_bytes)
    throw UsageError{"-b " + format_size(p.min_bytes) + " is larger than -e " +
                     format_size(p.max_bytes)};
  if (p.threads == 0 || p.threads > 1024 || p.threads % 32)
    throw UsageError{"--threads must be a multiple of 32 between 32 and 1024 (warps are whole)"};
  if (p.blocks == 0 || p.blocks > (1u << 20))
    throw UsageError{"--blocks must be between 1 and 1048576"};
  // Successive gets read different windows of the peer's buffer; on a GPU the windows must add up
  // to more than all the L1 caches together (132 x 256 KiB on an H200), or repeats could hit.
  const std::uint64_t window_min = gpu ? 64ull << 20 : 0;
  const std::uint64_t largest = p.max_bytes;
  p.buffer_bytes =
      (std::max(largest, window_min) + kGuardBytes + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  p.signals = SignalLayout::make(p.blocks, static_cast<std::uint64_t>(p.blocks) * p.threads);
}

std::vector<Case> Suite::cases() const {
  std::vector<Case> v;
  const RmaOp order[] = {RmaOp::Put, RmaOp::Get, RmaOp::PutSignal, RmaOp::FetchAdd,
                         RmaOp::CompareSwap};
  const Mode modes[] = {Mode::Lat, Mode::Bw, Mode::Bibw};
  const Scope scopes[] = {Scope::Thread, Scope::Warp, Scope::Block};
  auto wanted = [](const auto& list, auto x) {
    return std::find(list.begin(), list.end(), x) != list.end();
  };
  for (RmaOp op : order) {
    if (!wanted(opts_.ops, op)) continue;
    for (Mode m : modes) {
      if (!wanted(opts_.modes, m)) continue;
      if (is_atomic(op)) {
        // Atomics are single-thread operations with no group form: one latency table each.
        if (m == Mode::Lat) v.push_back({op, Scope::Thread, m});
        continue;
      }
      for (Scope s : scopes)
        if (wanted(opts_.scopes, s)) v.push_back({op, s, m});
    }
  }
  return v;
}

std::uint32_t Suite::iterations(const Case& c, std::uint64_t bytes) const {
  if (is_atomic(c.op)) return plan_.iters;
  const std::uint64_t budget = c.mode == Mode::Lat ? plan_.lat_budget : plan_.bw_budget;
  const std::uint64_t floor = c.mode == Mode::Lat ? plan_.min_lat_iters : 1;
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(budget / bytes, floor, plan_.iters));
}

RmaLaunch Suite::make_launch(const Case& c, std::uint64_t bytes, std::uint32_t iters) const {
  RmaLaunch l;
  l.op = c.op;
  l.scope = c.scope;
  l.mode = c.mode;
  l.bytes = bytes;
  l.iters = iters;
  l.peer = me_ == 0 ? 1 : 0;
  if (c.mode == Mode::Lat) {
    l.blocks = 1;
    l.threads = is_atomic(c.op) ? 1 : group_threads(c.scope, plan_.threads);
  } else {
    l.blocks = plan_.blocks;
    l.threads = plan_.threads;
    const unsigned gt = group_threads(c.scope, plan_.threads);
    const std::uint64_t groups = static_cast<std::uint64_t>(plan_.blocks) * plan_.threads / gt;
    l.split = split_message(bytes, groups, gt);
  }
  if (c.op == RmaOp::Get) {
    l.window_stride = (bytes + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
    const std::uint64_t slots = (plan_.buffer_bytes - kGuardBytes - bytes) / l.window_stride + 1;
    l.window_slots = static_cast<std::uint32_t>(std::min<std::uint64_t>(slots, iters ? iters : 1));
  }
  return l;
}

double Suite::orchestrate(RmaLaunch l, bool timed, bool pingpong, bool both) {
  double t = 0;
  if (pingpong) {
    // The responder's kernel is queued first and the barrier orders the initiator's launch after
    // it, so the initiator's timed kernel never waits for its peer to be launched.
    if (me_ == 1) {
      RmaLaunch r = l;
      r.responder = true;
      lib_.launch(r, false);
    }
    lib_.barrier();
    if (me_ == 0) lib_.launch(l, timed);
    if (me_ <= 1) t = lib_.wait();
  } else if (both) {
    lib_.barrier();
    if (me_ <= 1) {
      lib_.launch(l, timed);
      t = lib_.wait();
    }
    if (timed) {
      // The pair's time is the slower side's (doubles travel as their bits).
      std::uint64_t bits;
      std::memcpy(&bits, &t, sizeof bits);
      const std::vector<std::uint64_t> all = lib_.allgather(bits);
      double t0, t1;
      std::memcpy(&t0, &all[0], sizeof t0);
      std::memcpy(&t1, &all[1], sizeof t1);
      t = std::max(t0, t1);
    }
  } else if (me_ == 0) {
    lib_.launch(l, timed);
    t = lib_.wait();
  }
  signal_base_ += l.iters + 1;
  if (is_atomic(l.op)) atomic_value_ += l.iters;
  return t;
}

Row Suite::run_point(const Case& c, std::uint64_t bytes) {
  const bool atomic = is_atomic(c.op);
  const bool pingpong = c.op == RmaOp::PutSignal && c.mode == Mode::Lat;
  const bool both = pingpong || c.mode == Mode::Bibw;
  const bool is_get = c.op == RmaOp::Get;
  const bool active = me_ <= 1;
  const bool initiator = me_ == 0 || (both && me_ == 1);
  // Data flows from the "source" rank's buffer to the "destination" rank's buffer: for puts the
  // initiator's Priv into the peer's Sym, for gets the peer's Sym into the initiator's Priv.
  const bool is_source = active && (is_get ? (me_ == 1 || both) : initiator);
  const bool is_dest = active && (is_get ? initiator : (me_ == 1 || both));
  const Buffer source = is_get ? Buffer::Sym : Buffer::Priv;
  const Buffer dest = is_get ? Buffer::Priv : Buffer::Sym;
  const std::uint32_t iters = iterations(c, bytes);
  ++serial_;
  auto seed_of = [&](int rank) { return serial_ * 16 + static_cast<std::uint64_t>(rank) + 1; };

  // ---- data check: one launch on poisoned destinations, every byte compared ----
  std::uint64_t wrong = 0;
  if (atomic) {
    const std::uint32_t n = std::min(iters, kAtomicCheckIters);
    if (me_ == 1) lib_.write_signal(plan_.signals.atomic, atomic_value_);
    lib_.barrier();
    RmaLaunch l = make_launch(c, bytes, n);
    l.check = true;
    l.atomic_start = atomic_value_;
    orchestrate(l, false, false, false);
    if (me_ == 0) wrong += lib_.take_kernel_errors();
  } else {
    if (is_source) lib_.fill(source, bytes, seed_of(me_));
    if (is_dest) lib_.poison(dest, bytes + kGuardBytes);
    lib_.barrier();
    RmaLaunch l = make_launch(c, bytes, 1);
    l.check = true;
    l.signal_base = signal_base_;
    const std::uint64_t expected_signal = signal_base_ + 1;
    orchestrate(l, false, pingpong, both);
    lib_.barrier();  // every writer's kernel has finished: the destinations are final
    if (is_dest) {
      wrong += lib_.count_wrong(dest, bytes, kGuardBytes, seed_of(l.peer));
      if (pingpong) {
        for (std::uint64_t v : lib_.read_signals(plan_.signals.ping_pong, 1))
          wrong += v != expected_signal;
      } else if (c.op == RmaOp::PutSignal) {
        for (std::uint64_t v : lib_.read_signals(plan_.signals.group, l.split.groups))
          wrong += v != expected_signal;
      }
    }
    lib_.barrier();  // the checks are done before the warm-up writes into the destinations again
  }

  // ---- warm-up and timed launches ----
  if (plan_.warmup > 0) {
    RmaLaunch l = make_launch(c, bytes, std::min(plan_.warmup, iters));
    l.signal_base = signal_base_;
    l.atomic_start = atomic_value_;
    orchestrate(l, false, pingpong, both);
  }
  std::vector<double> per_op;
  for (unsigned r = 0; r < plan_.reps; ++r) {
    RmaLaunch l = make_launch(c, bytes, iters);
    l.signal_base = signal_base_;
    l.atomic_start = atomic_value_;
    const double us = orchestrate(l, true, pingpong, both);
    per_op.push_back(us / iters / (pingpong ? 2.0 : 1.0));
  }
  if (atomic && me_ == 0) wrong += lib_.take_kernel_errors();

  // Every rank's count (the allgather is also the point's closing barrier: no rank prepares the
  // next point's buffers while a peer may still write into them).
  std::uint64_t total_wrong = 0;
  for (std::uint64_t w : lib_.allgather(wrong)) total_wrong += w;

  Row row;
  row.op = to_string(c.op);
  row.scope = to_string(c.scope);
  row.mode = to_string(c.mode);
  row.bytes = bytes;
  row.iters = iters;
  const Stats s = stats_of(per_op);
  row.median_us = s.median;
  row.min_us = s.min;
  row.max_us = s.max;
  const double moved = static_cast<double>(bytes) * (c.mode == Mode::Bibw ? 2 : 1);
  row.gbps = s.median > 0 ? moved / (s.median * 1e3) : 0;
  row.wrong = total_wrong;
  return row;
}

RunInfo Suite::run_info() const {
  RunInfo info;
  info.library = lib_.library();
  info.subcommand = "rma";
  info.version = lib_.version();
  info.backend = lib_.backend();
  info.device = lib_.device();
  info.ranks = lib_.size();
  info.command = common_.command_line;
  const Plan& p = plan_;
  info.settings = {{"min_bytes", std::to_string(p.min_bytes)},
                   {"max_bytes", std::to_string(p.max_bytes)},
                   {"factor", std::to_string(p.factor)},
                   {"lat_max_bytes", std::to_string(p.lat_max)},
                   {"iters", std::to_string(p.iters)},
                   {"warmup", std::to_string(p.warmup)},
                   {"reps", std::to_string(p.reps)},
                   {"blocks", std::to_string(p.blocks)},
                   {"threads", std::to_string(p.threads)},
                   {"lat_budget_bytes", std::to_string(p.lat_budget)},
                   {"bw_budget_bytes", std::to_string(p.bw_budget)},
                   {"quick", common_.quick ? "1" : "0"}};
  const Case defs[] = {
      {RmaOp::Put, Scope::Thread, Mode::Lat},         {RmaOp::Get, Scope::Thread, Mode::Lat},
      {RmaOp::PutSignal, Scope::Thread, Mode::Lat},   {RmaOp::FetchAdd, Scope::Thread, Mode::Lat},
      {RmaOp::CompareSwap, Scope::Thread, Mode::Lat}, {RmaOp::Put, Scope::Thread, Mode::Bw},
      {RmaOp::Put, Scope::Thread, Mode::Bibw}};
  for (const Case& c : defs) {
    const std::string key =
        c.mode == Mode::Lat ? std::string(to_string(c.op)) + " lat" : to_string(c.mode);
    info.definitions.emplace_back(key, time_meaning(c));
  }
  info.definitions.emplace_back(
      "timing",
      "eager: each figure is the median (min, max) over reps kernel launches, each running an "
      "in-kernel loop of iters operations, timed with CUDA events (steady clock on the host "
      "backend); time is per operation");
  info.definitions.emplace_back("gbps",
                                "bytes moved per second at the median time, 1 GB = 1e9 bytes");
  return info;
}

void Suite::print_header(const std::vector<Case>& cases) const {
  const Plan& p = plan_;
  std::printf("# %s rma: %s %s, backend %s, %d ranks (rank 0 measures against rank 1%s)\n",
              common_.program.c_str(), lib_.library().c_str(), lib_.version().c_str(),
              lib_.backend().c_str(), lib_.size(), lib_.size() > 2 ? "; the others idle" : "");
  std::printf("# device: %s\n", lib_.device().c_str());
  std::printf(
      "# eager: every figure is one kernel launch running an in-kernel loop of `iters`\n"
      "#   operations; time is per operation, the median over %u launches (min, max beside)\n"
      "#   after %u warm-up operations, timed with %s.\n",
      p.reps, p.warmup,
      lib_.on_gpu() ? "CUDA events (a 50 us gate kernel ahead of the start event keeps the "
                      "host's launch cost out)"
                    : "a steady clock around launch + stream synchronize");
  std::printf(
      "# sizes %s .. %s (x%llu); latency up to %s; bandwidth launches %u blocks x %u threads\n",
      format_size(p.min_bytes).c_str(), format_size(p.max_bytes).c_str(),
      static_cast<unsigned long long>(p.factor),
      format_size(std::min(p.lat_max, p.max_bytes)).c_str(), p.blocks, p.threads);
  std::printf(
      "# GB/s: 1 GB = 1e9 bytes; busbw = algbw for a single pair. Every size is first run\n"
      "#   once on poisoned destinations and every byte checked (#wrong).\n");
  std::printf("# %zu tables\n", cases.size());
  std::fflush(stdout);
}

int Suite::run() {
  if (lib_.size() < 2)
    throw UsageError{
        "the rma benchmark needs 2 ranks (rank 0 measures against rank 1); run it as "
        "'gnio-run -n 2 -- " +
        common_.program + " rma ...'"};
  resolve();
  const std::vector<Case> list = cases();
  if (list.empty()) throw UsageError{"--op/--scope/--mode select nothing to measure"};
  const std::vector<std::uint64_t> all_sizes =
      size_steps(plan_.min_bytes, plan_.max_bytes, plan_.factor);
  lib_.allocate(plan_.buffer_bytes, plan_.signals);
  if (me_ == 0) print_header(list);

  TablePrinter table(stdout);
  std::uint64_t wrong = 0;
  for (const Case& c : list) {
    std::vector<std::uint64_t> sizes;
    if (is_atomic(c.op)) {
      sizes = {8};
    } else {
      for (std::uint64_t s : all_sizes)
        if (c.mode != Mode::Lat || s <= plan_.lat_max) sizes.push_back(s);
    }
    if (sizes.empty()) continue;
    if (me_ == 0) {
      char title[128];
      std::snprintf(title, sizeof title, "%s  scope=%s  mode=%s", to_string(c.op),
                    to_string(c.scope), to_string(c.mode));
      table.begin(title, time_meaning(c));
    }
    for (std::uint64_t s : sizes) {
      Row row = run_point(c, s);
      wrong += row.wrong;
      if (me_ == 0) table.row(row);
      rows_.push_back(std::move(row));
    }
    if (me_ == 0) table.end();
  }

  if (me_ == 0) {
    if (!common_.json_path.empty()) write_json(common_.json_path, run_info(), rows_);
    if (wrong)
      std::printf("#\n# FAILED: %llu wrong bytes/values in the data checks\n",
                  static_cast<unsigned long long>(wrong));
    else
      std::printf("#\n# all data checks passed (%zu points)\n", rows_.size());
    if (!common_.json_path.empty()) std::printf("# wrote %s\n", common_.json_path.c_str());
    std::fflush(stdout);
  }
  lib_.barrier();
  return wrong ? kExitWrongData : 0;
}

}  // namespace

int run_rma_suite(RmaLibrary& lib, const CommonOptions& common, const RmaOptions& opts) {
  Suite suite(lib, common, opts);
  return suite.run();
}

}  // namespace gnio::perf
