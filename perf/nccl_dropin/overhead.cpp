// Per-call overhead of the NCCL drop-in over gnio's own call: the same allreduce through
// ncclAllReduce and through gnio::allreduce, interleaved in rounds, medians of the rounds.
//  * host backend: each call waits for its result (gnio: allreduce + Comm::synchronize; the
//    drop-in: the NULL stream, which the host backend must complete before returning);
//  * GPUs: eager, as an application calls them: `calls` calls enqueued one by one on one CUDA
//    stream, then a stream synchronize; per call = that time / calls. Private cudaMalloc buffers
//    for both (the drop-in's communicator is another gnio communicator than `comm`, so a heap
//    buffer of one is a private buffer to the other).
//
//   gnio-run -n 2 -- nccl_dropin_overhead [rounds] [calls per round]
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gnio/coll.hpp"
#include "gnio/comm.hpp"

#if GNIO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(3, std::atoi(argv[1])) : 21;
  const int calls = argc > 2 ? std::max(1, std::atoi(argv[2])) : 200;
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Bootstrap& bs = comm.bootstrap();
  ncclUniqueId id{};
  if (comm.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess) return 1;
  bs.broadcast(&id, sizeof(id), 0);
  ncclComm_t nc = nullptr;
  if (ncclCommInitRank(&nc, comm.size(), id, comm.rank()) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitRank: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  gnio::Stream stream(comm);
  const bool gpu = comm.backend() == gnio::Backend::Cuda;
  cudaStream_t cuda_stream = nullptr;  // the NULL stream on the host backend
#if GNIO_HAVE_CUDA
  if (gpu && cudaStreamCreateWithFlags(&cuda_stream, cudaStreamNonBlocking) != cudaSuccess)
    return 1;
#endif
  const gnio::StreamRef on = gpu ? gnio::StreamRef(cuda_stream) : gnio::StreamRef(stream);
  std::printf(
      "# per-call time of an eager allreduce (float32 sum), %d ranks, backend %s, median of %d "
      "rounds of %d calls (%s)\n",
      comm.size(), gnio::to_string(comm.backend()), rounds, calls,
      gpu ? "enqueued on one CUDA stream, then synchronized; private cudaMalloc buffers"
          : "each call waits for its result");
  std::printf("%10s %14s %14s %14s\n", "bytes", "gnio us", "drop-in us", "overhead us");
  for (std::size_t count : {std::size_t{0}, std::size_t{2}, std::size_t{256}, std::size_t{16384}}) {
    std::vector<float> send_host(count + 1, 1.0f), recv_host(count + 1, 0.0f);
    float* send = send_host.data();
    float* recv = recv_host.data();
#if GNIO_HAVE_CUDA
    if (gpu) {
      if (cudaMalloc(&send, (count + 1) * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&recv, (count + 1) * sizeof(float)) != cudaSuccess ||
          cudaMemcpy(send, send_host.data(), (count + 1) * sizeof(float), cudaMemcpyHostToDevice) !=
              cudaSuccess)
        return 1;
    }
#endif
    // The end of a half: a GPU stream's queued calls are done (the host backend's calls each
    // waited already).
    auto drain = [&] {
#if GNIO_HAVE_CUDA
      if (gpu) return cudaStreamSynchronize(cuda_stream) == cudaSuccess;
#endif
      return true;
    };
    std::vector<double> own, dropin;
    for (int r = 0; r < rounds + 2; ++r) {  // the first two rounds warm up
      bs.barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        gnio::allreduce(comm, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, on);
        if (!gpu) comm.synchronize(stream);
      }
      if (!drain()) return 1;
      auto t1 = std::chrono::steady_clock::now();
      bs.barrier();
      auto t2 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i)
        if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, nc, cuda_stream) !=
            ncclSuccess) {
          std::fprintf(stderr, "ncclAllReduce: %s\n", ncclGetLastError(nc));
          return 1;
        }
      if (!drain()) return 1;
      auto t3 = std::chrono::steady_clock::now();
      if (r < 2) continue;
      own.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
      dropin.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count() / calls);
    }
    // Both paths computed the same sum into `recv`: the expected value proves the calls ran.
#if GNIO_HAVE_CUDA
    if (gpu)
      cudaMemcpy(recv_host.data(), recv, (count + 1) * sizeof(float), cudaMemcpyDeviceToHost);
#endif
    for (std::size_t i = 0; i < count; ++i)
      if (recv_host[i] != static_cast<float>(comm.size())) {
        std::fprintf(stderr, "rank %d: element %zu is %g, expected %d\n", comm.rank(), i,
                     recv_host[i], comm.size());
        return 1;
      }
#if GNIO_HAVE_CUDA
    if (gpu) {
      cudaFree(send);
      cudaFree(recv);
    }
#endif
    const double a = median(own), b = median(dropin);
    std::printf("%10zu %14.2f %14.2f %14.2f\n", count * 4, a, b, b - a);
  }
  ncclCommDestroy(nc);
  return 0;
}
