// gnio-perf rma: the RMA suite (rma_suite.hpp) run on gnio's device API. This file is the
// RmaLibrary over a gnio::Comm (host side only: the kernels are in rma_gnio_*.cpp) and the
// registration of the `rma` subcommand.
#include <chrono>
#include <memory>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/version.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/rma_suite.hpp"
#include "rma_gnio_kernels.hpp"

namespace gnio::perf {
namespace {

class GnioRma final : public RmaLibrary {
 public:
  GnioRma() : comm_(Comm::from_env()), stream_(comm_) {
    // Comm creation left the rank's GPU current, so the events land on the right device.
    if (comm_.backend() == Backend::Cuda) timer_ = std::make_unique<EventTimer>(stream_.cuda());
  }

  ~GnioRma() override {
    // Private memory is this rank's alone; the symmetric allocations go with the communicator,
    // whose destruction is collective.
    try {
      if (priv_) comm_.free_device(priv_);
      if (words_) comm_.free_device(words_);
    } catch (...) {
    }
  }

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::string library() const override { return "gnio"; }
  std::string version() const override { return version_string(); }
  std::string backend() const override { return to_string(comm_.backend()); }
  std::string device() const override { return comm_.device_description(); }
  bool on_gpu() const override { return comm_.backend() == Backend::Cuda; }
  unsigned default_blocks() const override {
    // Two blocks of 512 threads per SM: every SM busy, 1024 threads each to keep NVLink loads in
    // flight, without needing the 64-register budget of 1024-thread blocks.
    if (!on_gpu()) return 2;
    const int sms = current_device_sm_count();
    return sms > 0 ? 2u * static_cast<unsigned>(sms) : 264u;
  }
  unsigned default_threads() const override { return on_gpu() ? 512 : 32; }

  void barrier() override { comm_.bootstrap().barrier(); }
  std::vector<std::uint64_t> allgather(std::uint64_t value) override {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
    all[static_cast<std::size_t>(comm_.rank())] = value;
    comm_.bootstrap().allgather(all.data(), sizeof(std::uint64_t));
    return all;
  }

  void allocate(std::uint64_t buffer_bytes, const SignalLayout& layout) override {
    const std::uint64_t signal_words = layout.words;
    sym_ = comm_.alloc<std::uint8_t>(buffer_bytes);
    signals_ = comm_.alloc<std::uint64_t>(signal_words);
    priv_ = static_cast<std::uint8_t*>(comm_.alloc_device(buffer_bytes));
    words_ = static_cast<std::uint64_t*>(comm_.alloc_device(2 * sizeof(std::uint64_t)));
    comm_.fill(comm_.local(signals_), 0, signal_words * sizeof(std::uint64_t), stream_);
    comm_.fill(words_, 0, 2 * sizeof(std::uint64_t), stream_);
    // The device handle is taken after the allocations: they may have grown the heap.
    ctx_ = std::make_unique<GnioKernelContext>(GnioKernelContext{
        comm_.device_handle(), sym_, priv_, signals_, layout, words_, stream_,
        on_gpu() ? LaunchDims{.grid = 1024, .block = 256} : LaunchDims{.grid = 1, .block = 2}});
    // A background pattern everywhere: bytes a measurement reads beyond what a check prepared
    // (other get windows) are never zeros.
    const std::uint64_t background = 0xB00000 + static_cast<std::uint64_t>(comm_.rank());
    launch_fill(*ctx_, comm_.local(sym_), buffer_bytes, background, false);
    launch_fill(*ctx_, priv_, buffer_bytes, background + 0x100, false);
    comm_.synchronize(stream_);
    comm_.bootstrap().barrier();
  }

  void fill(Buffer b, std::uint64_t bytes, std::uint64_t seed) override {
    launch_fill(*ctx_, address(b), bytes, seed, false);
    comm_.synchronize(stream_);
  }
  void poison(Buffer b, std::uint64_t bytes) override {
    launch_fill(*ctx_, address(b), bytes, 0, true);
    comm_.synchronize(stream_);
  }
  std::uint64_t count_wrong(Buffer b, std::uint64_t bytes, std::uint64_t guard,
                            std::uint64_t seed) override {
    std::uint64_t* result = words_ + 1;
    comm_.fill(result, 0, sizeof(std::uint64_t), stream_);
    launch_count_wrong(*ctx_, address(b), bytes, guard, seed, result);
    std::uint64_t wrong = 0;
    comm_.copy(&wrong, result, sizeof wrong, stream_);
    comm_.synchronize(stream_);
    return wrong;
  }
  std::vector<std::uint64_t> read_signals(std::uint64_t first, std::uint64_t count) override {
    std::vector<std::uint64_t> v(count);
    if (count) {
      comm_.copy(v.data(), comm_.local(signals_ + static_cast<std::ptrdiff_t>(first)),
                 count * sizeof(std::uint64_t), stream_);
      comm_.synchronize(stream_);
    }
    return v;
  }
  void write_signal(std::uint64_t index, std::uint64_t value) override {
    comm_.copy(comm_.local(signals_ + static_cast<std::ptrdiff_t>(index)), &value, sizeof value,
               stream_);
    comm_.synchronize(stream_);
  }
  std::uint64_t take_kernel_errors() override {
    std::uint64_t n = 0;
    comm_.copy(&n, words_, sizeof n, stream_);
    comm_.fill(words_, 0, sizeof(std::uint64_t), stream_);
    comm_.synchronize(stream_);
    return n;
  }

  void launch(const RmaLaunch& l, bool timed) override {
    if (timed) {
      if (timer_)
        timer_->start();
      else
        host_start_ = std::chrono::steady_clock::now();
    }
    if (is_atomic(l.op)) {
      launch_rma_atomic(*ctx_, l);
    } else {
      using Fn = void (*)(const GnioKernelContext&, const RmaLaunch&);
      static constexpr Fn kByScope[] = {launch_rma_thread, launch_rma_warp, launch_rma_block};
      kByScope[static_cast<int>(l.scope)](*ctx_, l);
    }
    if (timed && timer_) timer_->stop();
    timed_ = timed_ || timed;
  }

  double wait() override {
    comm_.synchronize(stream_);  // bounded; throws the stall record of a device wait that timed out
    if (!timed_) return 0;
    timed_ = false;
    if (timer_) return timer_->elapsed_us();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start_)
        .count();
  }

 private:
  std::uint8_t* address(Buffer b) const { return b == Buffer::Sym ? comm_.local(sym_) : priv_; }

  Comm comm_;
  Stream stream_;
  std::unique_ptr<EventTimer> timer_;
  std::chrono::steady_clock::time_point host_start_;
  bool timed_ = false;
  SymPtr<std::uint8_t> sym_;
  SymPtr<std::uint64_t> signals_;
  std::uint8_t* priv_ = nullptr;
  std::uint64_t* words_ = nullptr;  // [0] atomics' error count, [1] check result
  std::unique_ptr<GnioKernelContext> ctx_;
};

int run_rma(CommonOptions& common, const RmaOptions& opts) {
  GnioRma lib;
  return run_rma_suite(lib, common, opts);
}

const SubcommandRegistrar kRegisterRma(make_subcommand<RmaOptions>(
    "rma",
    "one-sided put, get, put_signal and atomics between 2 ranks: latency and bandwidth at "
    "thread/warp/block scope",
    add_rma_options, run_rma));

}  // namespace
}  // namespace gnio::perf
