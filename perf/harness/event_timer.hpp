// Timing of kernels on a CUDA stream with CUDA events, shared by gnio-perf and nvshmem-perf.
//
// start() first queues a short "gate" kernel that keeps the GPU busy for kGateMicros, then the
// start event: while the gate runs, the host queues the measured kernel behind it, so the GPU
// goes from the start event straight into the kernel and the host's launch cost is not timed.
// What remains is the GPU's own kernel start and end (about 1-3 us) once per launch.
//
// The implementation needs nvcc (it launches a kernel); a build without CUDA gets one that throws
// Error(Unsupported), since the host backend times with a steady clock instead.
#pragma once

struct CUstream_st;

namespace gnio::perf {

/// Microseconds the gate kernel spins before each timed launch.
inline constexpr double kGateMicros = 50.0;

/// Times work queued on one CUDA stream between start() and stop().
class EventTimer {
 public:
  /// Creates the two events on the current device. `stream` is a cudaStream_t.
  explicit EventTimer(CUstream_st* stream);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  /// Queues the gate kernel, then the start event.
  void start();
  /// Queues the stop event.
  void stop();
  /// Waits for the stop event and returns the microseconds between the two events.
  double elapsed_us();

  /// True when this build can time CUDA streams (compiled by nvcc).
  static bool available();

 private:
  CUstream_st* stream_;
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

/// The calling thread's current GPU: its multiprocessor count, or 0 without CUDA.
int current_device_sm_count();

}  // namespace gnio::perf
