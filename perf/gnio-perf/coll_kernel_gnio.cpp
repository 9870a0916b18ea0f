// gnio-perf coll-kernel: allreduce called from inside an already running kernel (the device
// collectives of gnio/device/coll.hpp), the latency a kernel that communicates mid-computation
// pays, with no launch and no host in the loop.
//
//   gnio-run -n 2 -- gnio-perf coll-kernel [-b 8] [-e 64K] [-f 2] [-n 1000] [--algo auto]
//
// For every size, one kernel per rank (one group: a block of 256 threads, or one warp with
// --coop warp) makes -n float32 sum allreduces out of place over the world team, back to back.
//  * time   per call: the kernel's CUDA-event time (a steady clock on the host backend) divided
//           by -n, the slowest rank's, median over --reps kernels. The kernel's own start and end
//           (about 2-3 us) are spread over the -n calls; ranks start their kernels after a host
//           barrier, so the first call also absorbs their start skew (tens of us, spread alike).
//  * algbw  size / time (1 GB = 1e9 bytes); busbw = algbw x 2(n-1)/n (nccl-tests' allreduce).
//  * #wrong elements of the output that differ from the exact sum, all ranks: before timing,
//           one call on a poisoned output (plus a guard), every element checked; the output of
//           the last timed kernel is checked again.
// Buffers are in the symmetric heap (OneShot and TwoShot read and write peers' buffers).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "coll_kernel_gnio_options.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/report.hpp"
#include "run_info_gnio.hpp"

namespace gnio::perf {
namespace {

/// Poisoned elements behind the checked output (overruns).
constexpr std::size_t kGuard = 64;
/// What a poisoned element holds: no exact sum of the inputs is negative.
constexpr float kPoison = -1.5f;

/// Input element i of `rank`: small integers, so every sum is exact in float32.
float input_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(1 + i % 13));
}

/// `calls` allreduces by the kernel's only group; counts the calls that did not return Ok (and
/// stops at the first: a failed wait has already recorded where it stalled).
template <class Coop>
struct AllreduceLoop {
  CollComm cc;
  const float* send;
  float* recv;
  std::size_t count;
  CollAlgo algo;
  std::uint32_t calls;
  std::uint32_t* failures;
  GNIO_HD_INLINE void operator()() const {
    for (std::uint32_t i = 0; i < calls; ++i) {
      if (cc.allreduce<Coop>(send, recv, count, op::Sum{}, algo) != Status::Ok) {
        if (Coop{}.leader()) dev::atomic_fetch_add(failures, 1u, dev::Order::Relaxed);
        return;
      }
    }
  }
};

const char* algo_name(CollAlgo a) {
  switch (a) {
    case CollAlgo::LL: return "ll";
    case CollAlgo::OneShot: return "oneshot";
    case CollAlgo::TwoShot: return "twoshot";
    case CollAlgo::Ring: return "ring";
    default: return "auto";
  }
}

class KernelCollBench {
 public:
  KernelCollBench(CommonOptions& common, const KernelCollOptions& opts)
      : common_(common), opts_(opts), comm_(Comm::from_env()), stream_(comm_) {
    gpu_ = comm_.backend() == Backend::Cuda;
    if (gpu_) timer_ = std::make_unique<EventTimer>(stream_.cuda());
    const bool quick = common_.quick;
    min_ = common_.min_bytes.value_or(8);
    max_ = common_.max_bytes.value_or(quick || !gpu_ ? 4096 : 65536);
    factor_ = common_.factor.value_or(2);
    calls_ = common_.iters.value_or(gpu_ ? (quick ? 100 : 1000) : (quick ? 10 : 50));
    warmup_ = common_.warmup.value_or(gpu_ ? (quick ? 10 : 100) : (quick ? 2 : 5));
    reps_ = opts_.reps ? opts_.reps : (quick ? 3 : 9);
    if (min_ < sizeof(float)) min_ = sizeof(float);
    if (max_ < min_) throw UsageError{"-e must be at least -b"};
  }

  int run() {
    const std::size_t max_count = max_ / sizeof(float);
    send_ = comm_.alloc<float>(max_count);
    recv_ = comm_.alloc<float>(max_count + kGuard);
    failures_ = static_cast<std::uint32_t*>(comm_.alloc_device(sizeof(std::uint32_t)));
    comm_.fill(failures_, 0, sizeof(std::uint32_t), stream_);
    std::vector<float> in(max_count);
    for (std::size_t i = 0; i < max_count; ++i) in[i] = input_value(comm_.rank(), i);
    comm_.copy(comm_.local(send_), in.data(), max_count * sizeof(float), stream_);
    comm_.synchronize(stream_);
    // The handle is taken after the allocations: they may have grown the heap.
    cc_ = coll_comm(comm_, stream_);

    RunInfo info = run_info();
    TablePrinter table(stdout);
    if (comm_.rank() == 0) {
      std::printf("# gnio-perf coll-kernel: %d ranks, %s backend, %s\n", comm_.size(),
                  info.backend.c_str(), info.device.c_str());
      std::printf("# allreduce float32 sum out of place, %s per rank inside one kernel, algo %s\n",
                  opts_.warp ? "one warp"
                  : gpu_     ? "one block of 256 threads"
                             : "one block of 8 threads",
                  algo_name(opts_.algo));
      table.begin(
          "allreduce  scope=" + std::string(opts_.warp ? "warp" : "block") + "  mode=in-kernel",
          "time per call = kernel time / calls, slowest rank, median");
    }
    std::vector<Row> rows;
    std::uint64_t wrong_total = 0;
    for (std::uint64_t bytes = min_; bytes <= max_; bytes *= factor_) {
      const std::size_t count = bytes / sizeof(float);
      Row r;
      r.op = "allreduce";
      r.scope = opts_.warp ? "warp" : "block";
      r.mode = "in-kernel";
      r.bytes = count * sizeof(float);
      r.iters = calls_;
      r.bus_factor = 2.0 * (comm_.size() - 1) / comm_.size();
      r.wrong = check(count);
      launch(count, warmup_, false);
      std::vector<double> per_call;
      for (unsigned rep = 0; rep < reps_; ++rep) {
        comm_.bootstrap().barrier();
        const double us = launch(count, calls_, true) / calls_;
        per_call.push_back(slowest(us));
      }
      r.wrong += count_wrong(count);
      const Stats s = stats_of(per_call);
      r.median_us = s.median;
      r.min_us = s.min;
      r.max_us = s.max;
      r.gbps = static_cast<double>(r.bytes) / (s.median * 1e3);
      wrong_total += r.wrong;
      if (comm_.rank() == 0) table.row(r);
      rows.push_back(r);
      if (bytes > max_ / factor_) break;  // the next step would overflow or pass -e
    }
    if (comm_.rank() == 0) {
      table.end();
      if (!common_.json_path.empty()) write_json(common_.json_path, info, rows);
      if (wrong_total)
        std::fprintf(stderr, "gnio-perf coll-kernel: %llu wrong elements\n",
                     static_cast<unsigned long long>(wrong_total));
    }
    return wrong_total ? kExitWrongData : 0;
  }

 private:
  RunInfo run_info() const {
    RunInfo info = gnio_run_info(comm_, "coll-kernel", common_.command_line);
    info.timing = "in-kernel";
    info.settings = {{"calls_per_kernel", std::to_string(calls_)},
                     {"warmup_calls", std::to_string(warmup_)},
                     {"reps", std::to_string(reps_)},
                     {"algo", algo_name(opts_.algo)},
                     {"coop", opts_.warp ? "warp" : "block"}};
    info.definitions = {
        {"in-kernel",
         "allreduce (float32 sum, out of place, world team) called by one group per rank inside "
         "a running kernel; median_us = kernel time / calls per kernel, slowest rank, median over "
         "reps; includes the kernel's start/end and the ranks' start skew spread over the calls"}};
    return info;
  }

  /// Launches one kernel of `calls` allreduces of `count` elements and waits for it; returns its
  /// time in microseconds when `timed`. Throws on a failed call (with its stall record).
  double launch(std::size_t count, std::uint32_t calls, bool timed) {
    const float* send = comm_.local(send_);
    float* recv = comm_.local(recv_);
    auto host_start = std::chrono::steady_clock::now();
    if (timed && timer_) timer_->start();
    if (opts_.warp) {
      gnio::launch(stream_, {.grid = 1, .block = 32},
                   AllreduceLoop<Warp>{cc_, send, recv, count, opts_.algo, calls, failures_});
    } else {
      gnio::launch(stream_, {.grid = 1, .block = gpu_ ? 256u : 8u},
                   AllreduceLoop<Block>{cc_, send, recv, count, opts_.algo, calls, failures_});
    }
    if (timed && timer_) timer_->stop();
    comm_.synchronize(stream_);  // bounded; throws the stall record of a wait that timed out
    std::uint32_t failures = 0;
    comm_.copy(&failures, failures_, sizeof failures, stream_);
    comm_.synchronize(stream_);
    if (failures)
      throw Error(ErrorClass::Internal,
                  "coll-kernel: an in-kernel allreduce of " + std::to_string(count) +
                      " elements did not return Ok (and left no stall record)");
    if (!timed) return 0;
    if (timer_) return timer_->elapsed_us();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start)
        .count();
  }

  /// One call on a poisoned output; the wrong elements of all ranks.
  std::uint64_t check(std::size_t count) {
    std::vector<float> poison(count + kGuard, kPoison);
    comm_.copy(comm_.local(recv_), poison.data(), poison.size() * sizeof(float), stream_);
    comm_.synchronize(stream_);
    comm_.bootstrap().barrier();
    launch(count, 1, false);
    return count_wrong(count);
  }

  /// Elements of the output (and its guard) that are not what they must be, summed over ranks.
  std::uint64_t count_wrong(std::size_t count) {
    std::vector<float> out(count + kGuard);
    comm_.copy(out.data(), comm_.local(recv_), out.size() * sizeof(float), stream_);
    comm_.synchronize(stream_);
    const int n = comm_.size();
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const float want =
          i < count ? static_cast<float>(n * (n + 1) / 2) * input_value(0, i) : kPoison;
      if (out[i] != want) {
        if (wrong < 4)
          std::fprintf(stderr,
                       "gnio-perf coll-kernel: rank %d: count %zu: element %zu is %g, "
                       "expected %g\n",
                       comm_.rank(), count, i, static_cast<double>(out[i]),
                       static_cast<double>(want));
        ++wrong;
      }
    }
    std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
    all[static_cast<std::size_t>(comm_.rank())] = wrong;
    comm_.bootstrap().allgather(all.data(), sizeof(std::uint64_t));
    std::uint64_t total = 0;
    for (std::uint64_t w : all) total += w;
    return total;
  }

  /// The largest of every rank's `us`.
  double slowest(double us) {
    std::vector<double> all(static_cast<std::size_t>(comm_.size()));
    all[static_cast<std::size_t>(comm_.rank())] = us;
    comm_.bootstrap().allgather(all.data(), sizeof(double));
    return *std::max_element(all.begin(), all.end());
  }

  CommonOptions& common_;
  KernelCollOptions opts_;
  Comm comm_;
  Stream stream_;
  bool gpu_ = false;
  std::unique_ptr<EventTimer> timer_;
  std::uint64_t min_ = 0, max_ = 0, factor_ = 2;
  std::uint32_t calls_ = 0, warmup_ = 0;
  unsigned reps_ = 0;
  SymPtr<float> send_, recv_;
  std::uint32_t* failures_ = nullptr;
  CollComm cc_{};
};

int run_coll_kernel(CommonOptions& common, const KernelCollOptions& opts) {
  KernelCollBench bench(common, opts);
  return bench.run();
}

const SubcommandRegistrar kRegisterCollKernel(make_subcommand<KernelCollOptions>(
    "coll-kernel", "allreduce called inside a running kernel (no launch): time per call",
    add_coll_kernel_options, run_coll_kernel));

}  // namespace
}  // namespace gnio::perf
