// gnio-perf msgrate: how many small operations per second many device threads get through to a
// peer: every thread of one kernel on rank 0 issues -n 8-byte put_signals (or puts, or signals)
// to rank 1, then quiets; rank 1 waits until every signal arrived. Over p2p this is the link's
// small-store rate; over the proxy transport (ranks on different nodes) it is the proxy's
// message rate, the figure that bounds fine-grained communication across nodes.
//
//   gnio-run -n 2 [--nodes 2] -- gnio-perf msgrate [-n OPS] [--grid G] [--block B] [--op OP]
//
//  * rate   operations / time, time = rank 0's kernel from its first operation to the end of its
//           quiet() (CUDA events; a steady clock on the host backend), median over --reps
//           kernels. Rank 1 checks the signals of every kernel and the data afterwards.
//  * #wrong signal words that did not reach their exact count plus data words that do not hold
//           what the last operation wrote (put, put_signal), after poisoning.
// Each block of rank 0 has its own signal word on rank 1 (so the rate is not that of one
// contended word), and a thread's successive operations write kSlots different data words (a GPU
// merges repeated stores to one address before they cross the link: an earlier version that
// rewrote one word reported 81 G puts/s on 2 x H200, more bytes than NVLink carries); with --op
// put, the data words are checked only.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/report.hpp"
#include "msgrate_gnio_options.hpp"
#include "run_info_gnio.hpp"

namespace gnio::perf {
namespace {

/// User + system CPU time of every thread of this process so far, in seconds.
double process_cpu_seconds() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

/// Data words per sender thread, written in turn.
constexpr std::uint32_t kSlots = 16;

const char* op_name(RateOp op) {
  switch (op) {
    case RateOp::Put: return "put";
    case RateOp::Signal: return "signal";
    default: return "put_signal";
  }
}

/// What a data word holds before any operation.
constexpr std::uint64_t kPoisonWord = 0xDEADBEEFDEADBEEFull;

/// What thread t's data words hold after its operations.
GNIO_HD_INLINE std::uint64_t data_value(std::size_t t) {
  return 0x5A5A000000000000ull + t * 7919u + 1;
}

/// Rank 0's kernel: every thread issues `ops` operations of 8 bytes to `peer`, then quiet().
struct SendKernel {
  DeviceComm dc;
  SymPtr<std::uint64_t> data;     // [kSlots][threads] on the peer
  SymPtr<std::uint64_t> signals;  // [blocks] on the peer
  const std::uint64_t* src;       // [threads] local values
  RateOp op;
  std::uint32_t ops;
  int peer;
  GNIO_HD_INLINE void operator()() const {
    const std::size_t t = dev::global_thread();
    const std::size_t threads = dev::global_threads();
    const SymPtr<std::uint64_t> sig = signals + static_cast<std::ptrdiff_t>(dev::block());
    for (std::uint32_t i = 0; i < ops; ++i) {
      const SymPtr<std::uint64_t> dst =
          data + static_cast<std::ptrdiff_t>((i % kSlots) * threads + t);
      switch (op) {
        case RateOp::PutSignal: dc.put_signal(dst, src + t, 1, sig, 1, SignalOp::Add, peer); break;
        case RateOp::Put: dc.put_nbi(dst, src + t, 1, peer); break;
        case RateOp::Signal: dc.signal(sig, 1, SignalOp::Add, peer); break;
      }
    }
    dc.quiet();
  }
};

/// Rank 1's kernel: one thread per block of the sender waits until that block's signal holds
/// `expect`; failures are counted.
struct WaitKernel {
  DeviceComm dc;
  SymPtr<std::uint64_t> signals;
  std::uint64_t expect;
  unsigned blocks;
  std::uint32_t* failures;
  GNIO_HD_INLINE void operator()() const {
    for (unsigned b = dev::thread(); b < blocks; b += dev::block_size())
      if (dc.wait_signal(signals + static_cast<std::ptrdiff_t>(b), Cmp::Ge, expect) != Status::Ok)
        dev::atomic_fetch_add(failures, 1u, dev::Order::Relaxed);
  }
};

class RateBench {
 public:
  RateBench(CommonOptions& common, const RateOptions& opts)
      : common_(common), opts_(opts), comm_(Comm::from_env()), stream_(comm_) {
    gpu_ = comm_.backend() == Backend::Cuda;
    if (gpu_) timer_ = std::make_unique<EventTimer>(stream_.cuda());
    if (comm_.size() != 2)
      throw UsageError{"msgrate runs on exactly 2 ranks (gnio-run -n 2), not " +
                       std::to_string(comm_.size())};
    grid_ = opts_.grid ? opts_.grid : gpu_ ? 132 : 2;
    block_ = opts_.block ? opts_.block : gpu_ ? 256 : 4;
    ops_ = common_.iters.value_or(gpu_ ? (common_.quick ? 100 : 1000) : (common_.quick ? 20 : 100));
    reps_ = opts_.reps ? opts_.reps : (common_.quick ? 3 : 5);
  }

  int run() {
    const std::size_t threads = std::size_t{grid_} * block_;
    data_ = comm_.alloc<std::uint64_t>(kSlots * threads);
    signals_ = comm_.alloc<std::uint64_t>(grid_);
    src_ = static_cast<std::uint64_t*>(comm_.alloc_device(threads * sizeof(std::uint64_t)));
    failures_ = static_cast<std::uint32_t*>(comm_.alloc_device(sizeof(std::uint32_t)));
    std::vector<std::uint64_t> values(threads), poison(kSlots * threads, kPoisonWord);
    for (std::size_t t = 0; t < threads; ++t) values[t] = data_value(t);
    comm_.copy(src_, values.data(), threads * sizeof(std::uint64_t), stream_);
    comm_.copy(comm_.local(data_), poison.data(), poison.size() * sizeof(std::uint64_t), stream_);
    comm_.fill(comm_.local(signals_), 0, grid_ * sizeof(std::uint64_t), stream_);
    comm_.fill(failures_, 0, sizeof(std::uint32_t), stream_);
    comm_.synchronize(stream_);
    const DeviceComm dc = comm_.device_handle();  // after the allocations (they may grow the heap)
    const int peer = 1 - comm_.rank();
    const bool route_proxy = dc.route(peer) == Route::Proxy;

    std::vector<double> rates;
    std::uint64_t expect = 0;
    // This process's CPU time (every thread: the proxy's, the host backend's kernel threads, the
    // host's waits) over the wall time of the timed repetitions (barriers included: the receiving
    // rank's work happens while it waits in them).
    double cpu_s = 0;
    auto wall_start = std::chrono::steady_clock::now();
    for (unsigned rep = 0; rep <= reps_; ++rep) {  // rep 0 warms up
      const bool signalled = opts_.op != RateOp::Put;
      if (signalled) expect += ops_ * std::uint64_t{block_};
      if (rep == 1) {
        cpu_s = process_cpu_seconds();
        wall_start = std::chrono::steady_clock::now();
      }
      comm_.bootstrap().barrier();
      double us = 0;
      if (comm_.rank() == 0) {
        const auto host_start = std::chrono::steady_clock::now();
        if (timer_) timer_->start();
        gnio::launch(stream_, {.grid = grid_, .block = block_},
                     SendKernel{dc, data_, signals_, src_, opts_.op, ops_, peer});
        if (timer_) timer_->stop();
        comm_.synchronize(stream_);
        us = timer_ ? timer_->elapsed_us()
                    : std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                                host_start)
                          .count();
      } else if (signalled) {
        gnio::launch(stream_, {.grid = 1, .block = gpu_ ? 128u : 2u},
                     WaitKernel{dc, signals_, expect, grid_, failures_});
        comm_.synchronize(stream_);
      }
      comm_.bootstrap().barrier();
      // Ops per us; only the sender times anything.
      if (rep > 0 && comm_.rank() == 0) rates.push_back(static_cast<double>(threads) * ops_ / us);
    }
    cpu_s = process_cpu_seconds() - cpu_s;
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    const std::uint64_t wrong = count_wrong(expect);
    double cores[2] = {0, 0};
    cores[comm_.rank()] = wall_s > 0 ? cpu_s / wall_s : 0;
    comm_.bootstrap().allgather(cores, sizeof(double));

    if (comm_.rank() == 0) {
      const Stats s = stats_of(rates);
      const double total_ops = static_cast<double>(threads) * ops_;
      std::printf("# gnio-perf msgrate: %s, rank 0 -> rank 1 over %s, %s backend, %s\n",
                  op_name(opts_.op), route_proxy ? "the proxy transport" : "p2p",
                  to_string(comm_.backend()), comm_.device_description().c_str());
      std::printf("# %u x %u threads, %u operations of 8 B each per kernel (%.0f), median of %u\n",
                  grid_, block_, ops_, total_ops, reps_);
      std::printf("#       op    route   Mops/s  min Mops/s  max Mops/s  time(us)  #wrong\n");
      std::printf("%10s %8s %8.3f %11.3f %11.3f %9.1f %7llu\n", op_name(opts_.op),
                  route_proxy ? "proxy" : "p2p", s.median, s.min, s.max, total_ops / s.median,
                  static_cast<unsigned long long>(wrong));
      std::printf(
          "# CPU while timed (user + system time / wall time, every thread of the process: "
          "proxy threads%s): rank 0 %.2f cores, rank 1 %.2f cores\n",
          gpu_ ? "" : ", the host backend's kernel threads", cores[0], cores[1]);
      if (!common_.json_path.empty()) {
        RunInfo info = gnio_run_info(comm_, "msgrate", common_.command_line);
        info.timing = "eager";
        info.settings = {{"grid", std::to_string(grid_)},
                         {"block", std::to_string(block_)},
                         {"ops_per_thread", std::to_string(ops_)},
                         {"route", route_proxy ? "proxy" : "p2p"},
                         {"cpu_cores_rank0", std::to_string(cores[0])},
                         {"cpu_cores_rank1", std::to_string(cores[1])}};
        info.definitions = {{"rate",
                             "8-byte operations per microsecond (Mops/s) from every thread of "
                             "one kernel on rank 0 to rank 1, kernel time including quiet()"}};
        Row r;
        r.op = op_name(opts_.op);
        r.scope = "thread";
        r.mode = "rate";
        r.bytes = 8;
        r.iters = ops_;
        r.median_us = 1.0 / s.median;  // per operation
        r.min_us = 1.0 / s.max;
        r.max_us = 1.0 / s.min;
        r.gbps = 8e-3 * s.median;
        r.wrong = wrong;
        write_json(common_.json_path, info, {r});
      }
      if (wrong)
        std::fprintf(stderr, "gnio-perf msgrate: %llu wrong words\n",
                     static_cast<unsigned long long>(wrong));
    }
    return wrong ? kExitWrongData : 0;
  }

 private:
  /// Rank 1's signal words that are not `expect` and data words not what the sender wrote,
  /// plus waits that failed, on every rank.
  std::uint64_t count_wrong(std::uint64_t expect) {
    std::uint64_t wrong = 0;
    if (comm_.rank() == 1) {
      const std::size_t threads = std::size_t{grid_} * block_;
      std::vector<std::uint64_t> data(kSlots * threads), sig(grid_);
      std::uint32_t failures = 0;
      comm_.copy(data.data(), comm_.local(data_), data.size() * sizeof(std::uint64_t), stream_);
      comm_.copy(sig.data(), comm_.local(signals_), grid_ * sizeof(std::uint64_t), stream_);
      comm_.copy(&failures, failures_, sizeof failures, stream_);
      comm_.synchronize(stream_);
      wrong += failures;
      for (std::uint64_t s : sig) wrong += s != expect;
      // Slots a thread wrote hold its value; with fewer operations than slots the rest stay
      // poisoned (signal writes none).
      const std::uint32_t written = opts_.op == RateOp::Signal ? 0 : std::min(ops_, kSlots);
      for (std::uint32_t k = 0; k < kSlots; ++k)
        for (std::size_t t = 0; t < threads; ++t)
          wrong += data[k * threads + t] != (k < written ? data_value(t) : kPoisonWord);
    }
    std::vector<std::uint64_t> all(2);
    all[static_cast<std::size_t>(comm_.rank())] = wrong;
    comm_.bootstrap().allgather(all.data(), sizeof(std::uint64_t));
    return all[0] + all[1];
  }

  CommonOptions& common_;
  RateOptions opts_;
  Comm comm_;
  Stream stream_;
  bool gpu_ = false;
  std::unique_ptr<EventTimer> timer_;
  unsigned grid_ = 0, block_ = 0, reps_ = 0;
  std::uint32_t ops_ = 0;
  SymPtr<std::uint64_t> data_, signals_;
  std::uint64_t* src_ = nullptr;
  std::uint32_t* failures_ = nullptr;
};

int run_msgrate(CommonOptions& common, const RateOptions& opts) {
  RateBench bench(common, opts);
  return bench.run();
}

const SubcommandRegistrar kRegisterMsgrate(make_subcommand<RateOptions>(
    "msgrate",
    "8-byte operations per second from many device threads to one peer (p2p or the proxy)",
    add_msgrate_options, run_msgrate));

}  // namespace
}  // namespace gnio::perf
