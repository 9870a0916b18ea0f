#include "event_timer.hpp"

#include <cstdint>

#include "gnio/error.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <string>
#endif

namespace gnio::perf {

#if defined(__CUDACC__)
namespace {

/// Spins on the GPU's global timer for `ns` nanoseconds (one thread).
__global__ void gate_kernel(std::uint64_t ns) {
  std::uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(ErrorClass::SystemError, std::string("gnio-perf timer: ") + what +
                                             " failed: " + cudaGetErrorName(err) + ": " +
                                             cudaGetErrorString(err));
}

}  // namespace

EventTimer::EventTimer(CUstream_st* stream) : stream_(stream) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start() {
  gate_kernel<<<1, 1, 0, stream_>>>(static_cast<std::uint64_t>(kGateMicros * 1000));
  check(cudaGetLastError(), "gate kernel launch");
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream_), "cudaEventRecord(start)");
}

void EventTimer::stop() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream_), "cudaEventRecord(stop)");
}

double EventTimer::elapsed_us() {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  check(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
      "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1000.0;
}

bool EventTimer::available() {
  return true;
}

int current_device_sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  return sms;
}

#else  // built without nvcc: only the host backend, which times with a steady clock

[[noreturn]] static void no_cuda() {
  throw Error(ErrorClass::Unsupported,
              "gnio-perf was built without CUDA: CUDA event timing is unavailable; rebuild with "
              "-DGNIO_CUDA=ON or run with GNIO_BACKEND=host");
}
EventTimer::EventTimer(CUstream_st* stream) : stream_(stream) {
  no_cuda();
}
EventTimer::~EventTimer() = default;
void EventTimer::start() {
  no_cuda();
}
void EventTimer::stop() {
  no_cuda();
}
double EventTimer::elapsed_us() {
  no_cuda();
}
bool EventTimer::available() {
  return false;
}
int current_device_sm_count() {
  return 0;
}

#endif

}  // namespace gnio::perf
