// CUDA graphs for benchmarks: capture what a callback enqueues on a stream (e.g. G collective
// calls) once, then replay it with one launch. Replays drop the host's per-call enqueue cost from
// the timed window, as nccl-tests' -G does, so small-message figures show the GPU's own time.
//
// The implementation needs nvcc (graph calls belong to the CUDA runtime that libgnio shares); a
// build without CUDA gets one that throws Error(Unsupported): the host backend times eagerly.
#pragma once

#include <functional>

struct CUstream_st;

namespace gnio::perf {

/// One captured, instantiated CUDA graph, replayed on the stream it was captured on.
class CudaGraph {
 public:
  /// Captures everything `enqueue` queues on `stream` (a cudaStream_t) and instantiates it. The
  /// capture is thread-local: other threads' CUDA calls are not affected. Throws
  /// Error(SystemError) when capturing or instantiating fails (the stream is left usable).
  CudaGraph(CUstream_st* stream, const std::function<void()>& enqueue);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Queues one replay of the graph on its stream.
  void launch();

  /// True when this build can capture graphs (compiled by nvcc).
  static bool available();

 private:
  CUstream_st* stream_;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace gnio::perf
