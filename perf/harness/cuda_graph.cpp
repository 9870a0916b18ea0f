#include "cuda_graph.hpp"

#include <string>

#include "gnio/error.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace gnio::perf {

#if defined(__CUDACC__)
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(ErrorClass::SystemError, std::string("gnio-perf graph: ") + what +
                                             " failed: " + cudaGetErrorName(err) + ": " +
                                             cudaGetErrorString(err));
}

}  // namespace

CudaGraph::CudaGraph(CUstream_st* stream, const std::function<void()>& enqueue) : stream_(stream) {
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    // End the capture whatever happened, or the stream stays unusable for the error report.
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  exec_ = exec;
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CudaGraph::launch() {
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream_), "cudaGraphLaunch");
}

bool CudaGraph::available() {
  return true;
}

#else  // built without nvcc: only the host backend, which times eagerly

[[noreturn]] static void no_graphs() {
  throw Error(ErrorClass::Unsupported,
              "gnio-perf was built without CUDA: CUDA graphs are unavailable; use -G 0 (eager) "
              "or rebuild with -DGNIO_CUDA=ON");
}
CudaGraph::CudaGraph(CUstream_st* stream, const std::function<void()>&) : stream_(stream) {
  no_graphs();
}
CudaGraph::~CudaGraph() = default;
void CudaGraph::launch() {
  no_graphs();
}
bool CudaGraph::available() {
  return false;
}

#endif

}  // namespace gnio::perf
