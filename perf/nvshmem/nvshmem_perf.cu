// nvshmem-perf: gnio-perf's RMA suite (perf/harness/rma_suite.hpp) run on NVSHMEM, for a
// side-by-side comparison with the same operations, sizes, iterations, timing and data checks.
//
//   gnio-run -n 2 -- nvshmem-perf rma [the options of gnio-perf rma]
//
// NVSHMEM is initialised with its unique-id bootstrap; the id travels over gnio's own bootstrap,
// so the program runs under gnio-run (or any launcher gnio understands) without nvshmrun or MPI.
// Before initialising it sets, unless already set: NVSHMEM_DISABLE_NVLS=1 (NVLink multicast must
// stay off on the shared GPU machines), NVSHMEM_REMOTE_TRANSPORT=none (one node: P2P only, no
// attempt to load network transports) and NVSHMEM_SYMMETRIC_SIZE (enough for the run's buffers).
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"
#include "harness/driver.hpp"
#include "harness/event_timer.hpp"
#include "harness/rma_suite.hpp"
#include "nvshmem_kernels.hpp"

namespace gnio::perf::nvshmem_bench {
namespace {

/// How long wait() lets a stream run before declaring the job stuck (NVSHMEM's waits have no
/// deadline of their own).
constexpr double kWaitSeconds = 300;

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(ErrorClass::SystemError, std::string("nvshmem-perf: ") + what +
                                             " failed: " + cudaGetErrorName(err) + ": " +
                                             cudaGetErrorString(err));
}

void set_default_env(const char* name, const std::string& value) {
  if (!std::getenv(name)) setenv(name, value.c_str(), 0);
}

class NvshmemRma final : public RmaLibrary {
 public:
  NvshmemRma() : boot_(Bootstrap::from_env()) {
    const LaunchInfo info = launch_info_from_env();
    int count = 0;
    cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count == 0) throw Error(ErrorClass::Unsupported, "nvshmem-perf: no GPU visible");
    const int local = info.local_rank >= 0 ? info.local_rank : boot_->rank();
    device_ = local % count;
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    sms_ = prop.multiProcessorCount;
    char line[512];
    std::snprintf(line, sizeof line, "%s (GPU %d, %d SMs, %.0f GiB, sm_%d%d)", prop.name, device_,
                  sms_, prop.totalGlobalMem / double(1ull << 30), prop.major, prop.minor);
    device_text_ = line;
  }

  ~NvshmemRma() override {
    if (!initialized_) return;
    if (stream_) cudaStreamSynchronize(stream_);
    if (priv_) cudaFree(priv_);
    if (words_) cudaFree(words_);
    timer_.reset();
    if (stream_) cudaStreamDestroy(stream_);
    nvshmem_free(signals_);
    nvshmem_free(sym_);
    nvshmem_finalize();  // collective
  }

  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }
  std::string library() const override { return "nvshmem"; }
  std::string version() const override {
    return std::to_string(NVSHMEM_VENDOR_MAJOR_VERSION) + "." +
           std::to_string(NVSHMEM_VENDOR_MINOR_VERSION) + "." +
           std::to_string(NVSHMEM_VENDOR_PATCH_VERSION);
  }
  std::string backend() const override { return "cuda"; }
  std::string device() const override { return device_text_; }
  bool on_gpu() const override { return true; }
  unsigned default_blocks() const override { return 2u * static_cast<unsigned>(sms_); }
  unsigned default_threads() const override { return 512; }

  void barrier() override { boot_->barrier(); }
  std::vector<std::uint64_t> allgather(std::uint64_t value) override {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size()));
    all[static_cast<std::size_t>(rank())] = value;
    boot_->allgather(all.data(), sizeof(std::uint64_t));
    return all;
  }

  void allocate(std::uint64_t buffer_bytes, const SignalLayout& layout) override {
    // NVSHMEM sizes its heap at initialisation, so it starts here, once the sizes are known.
    const std::uint64_t signal_bytes = layout.words * sizeof(std::uint64_t);
    const std::uint64_t heap = (buffer_bytes + signal_bytes + (256ull << 20) + (2ull << 20) - 1) /
                               (2ull << 20) * (2ull << 20);
    set_default_env("NVSHMEM_DISABLE_NVLS", "1");
    set_default_env("NVSHMEM_REMOTE_TRANSPORT", "none");
    set_default_env("NVSHMEM_SYMMETRIC_SIZE", std::to_string(heap));
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (rank() == 0 && nvshmemx_get_uniqueid(&id) != 0)
      throw Error(ErrorClass::SystemError, "nvshmem-perf: nvshmemx_get_uniqueid failed");
    boot_->broadcast(&id, sizeof id, 0);
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    if (nvshmemx_set_attr_uniqueid_args(rank(), size(), &id, &attr) != 0)
      throw Error(ErrorClass::SystemError, "nvshmem-perf: nvshmemx_set_attr_uniqueid_args failed");
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0)
      throw Error(ErrorClass::SystemError, "nvshmem-perf: nvshmemx_init_attr failed");
    initialized_ = true;
    if (nvshmem_my_pe() != rank() || nvshmem_n_pes() != size())
      throw Error(ErrorClass::Internal,
                  "nvshmem-perf: NVSHMEM's PE numbering differs from the launcher's ranks");

    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    timer_ = std::make_unique<EventTimer>(stream_);
    sym_ = static_cast<std::uint8_t*>(nvshmem_malloc(buffer_bytes));
    signals_ = static_cast<std::uint64_t*>(nvshmem_malloc(signal_bytes));
    if (!sym_ || !signals_)
      throw Error(ErrorClass::SystemError, "nvshmem-perf: nvshmem_malloc of " +
                                               std::to_string(buffer_bytes) +
                                               " bytes failed (raise NVSHMEM_SYMMETRIC_SIZE)");
    cuda_check(cudaMalloc(&priv_, buffer_bytes), "cudaMalloc");
    cuda_check(cudaMalloc(&words_, 2 * sizeof(std::uint64_t)), "cudaMalloc");
    cuda_check(cudaMemsetAsync(signals_, 0, signal_bytes, stream_), "cudaMemset");
    cuda_check(cudaMemsetAsync(words_, 0, 2 * sizeof(std::uint64_t), stream_), "cudaMemset");
    ctx_.sym = sym_;
    ctx_.priv = static_cast<std::uint8_t*>(priv_);
    ctx_.signals = signals_;
    ctx_.layout = layout;
    ctx_.errors = words_;
    ctx_.stream = stream_;
    const std::uint64_t background = 0xB00000 + static_cast<std::uint64_t>(rank());
    launch_fill(ctx_, sym_, buffer_bytes, background, false);
    launch_fill(ctx_, ctx_.priv, buffer_bytes, background + 0x100, false);
    sync();
    boot_->barrier();
  }

  void fill(Buffer b, std::uint64_t bytes, std::uint64_t seed) override {
    launch_fill(ctx_, address(b), bytes, seed, false);
    sync();
  }
  void poison(Buffer b, std::uint64_t bytes) override {
    launch_fill(ctx_, address(b), bytes, 0, true);
    sync();
  }
  std::uint64_t count_wrong(Buffer b, std::uint64_t bytes, std::uint64_t guard,
                            std::uint64_t seed) override {
    cuda_check(cudaMemsetAsync(words_ + 1, 0, sizeof(std::uint64_t), stream_), "cudaMemset");
    launch_count_wrong(ctx_, address(b), bytes, guard, seed, words_ + 1);
    std::uint64_t wrong = 0;
    cuda_check(cudaMemcpyAsync(&wrong, words_ + 1, sizeof wrong, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpy");
    sync();
    return wrong;
  }
  std::vector<std::uint64_t> read_signals(std::uint64_t first, std::uint64_t count) override {
    std::vector<std::uint64_t> v(count);
    if (count) {
      cuda_check(cudaMemcpyAsync(v.data(), signals_ + first, count * sizeof(std::uint64_t),
                                 cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpy");
      sync();
    }
    return v;
  }
  void write_signal(std::uint64_t index, std::uint64_t value) override {
    cuda_check(
        cudaMemcpyAsync(signals_ + index, &value, sizeof value, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpy");
    sync();
  }
  std::uint64_t take_kernel_errors() override {
    std::uint64_t n = 0;
    cuda_check(cudaMemcpyAsync(&n, words_, sizeof n, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpy");
    cuda_check(cudaMemsetAsync(words_, 0, sizeof(std::uint64_t), stream_), "cudaMemset");
    sync();
    return n;
  }

  void launch(const RmaLaunch& l, bool timed) override {
    if (timed) timer_->start();
    launch_rma(ctx_, l);
    if (timed) timer_->stop();
    timed_ = timed_ || timed;
  }

  double wait() override {
    sync();
    if (!timed_) return 0;
    timed_ = false;
    return timer_->elapsed_us();
  }

 private:
  std::uint8_t* address(Buffer b) const { return b == Buffer::Sym ? sym_ : ctx_.priv; }

  /// Waits for the stream, bounded: NVSHMEM's device waits never give up, so a peer that died
  /// would otherwise hang this rank forever.
  void sync() {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
    for (unsigned spin = 0;; ++spin) {
      const cudaError_t err = cudaStreamQuery(stream_);
      if (err == cudaSuccess) return;
      if (err != cudaErrorNotReady) cuda_check(err, "kernel on the benchmark stream");
      if (std::chrono::steady_clock::now() > deadline)
        throw Error(ErrorClass::Timeout, "nvshmem-perf: rank " + std::to_string(rank()) +
                                             ": a kernel did not finish within " +
                                             std::to_string(static_cast<int>(kWaitSeconds)) +
                                             " s; its peer probably stopped");
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::unique_ptr<Bootstrap> boot_;
  int device_ = 0;
  int sms_ = 0;
  std::string device_text_;
  bool initialized_ = false;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<EventTimer> timer_;
  bool timed_ = false;
  std::uint8_t* sym_ = nullptr;
  std::uint64_t* signals_ = nullptr;
  void* priv_ = nullptr;
  std::uint64_t* words_ = nullptr;  // [0] atomics' error count, [1] check result
  KernelContext ctx_;
};

int run_rma(CommonOptions& common, const RmaOptions& opts) {
  NvshmemRma lib;
  return run_rma_suite(lib, common, opts);
}

const SubcommandRegistrar kRegisterRma(make_subcommand<RmaOptions>(
    "rma",
    "gnio-perf rma's measurements on NVSHMEM (same options, same JSON with \"library\": "
    "\"nvshmem\")",
    add_rma_options, run_rma));

}  // namespace
}  // namespace gnio::perf::nvshmem_bench

int main(int argc, char** argv) {
  return gnio::perf::driver_main(argc, argv, "gnio-perf's benchmarks on NVSHMEM, for comparison");
}
