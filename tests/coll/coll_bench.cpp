// coll_bench: nccl-tests-style timing of gnio's host collectives, for tuning on GPUs.
//
//   gnio-run -n 2 -- coll_bench [--coll allreduce] [--type f32] [--op sum] [--algo auto]
//                               [--min 8] [--max 1G] [--iters 50] [--warmup 5] [--eager]
//                               [--private] [--inplace]
//
// Every size (doubling from --min to --max bytes of the rank's larger buffer) runs --iters calls
// captured into one CUDA graph (or enqueued eagerly with --eager) and reports the mean time per
// call, algbw = bytes / time and busbw = algbw x the nccl-tests factor (allreduce 2(n-1)/n;
// reduce_scatter, allgather, alltoall (n-1)/n; broadcast, reduce 1). Buffers are in the symmetric
// heap (zero-copy) unless --private. Also runs on the host backend (then with eager timing only).
// Prints one line per size; the numbers are rank 0's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "gnio/stream.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace {

struct Options {
  std::string coll = "allreduce", type = "f32", op = "sum", algo = "auto";
  std::size_t min = 8, max = std::size_t{1} << 30;
  int iters = 50, warmup = 5;
  bool eager = false, priv = false, inplace = false;
};

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'k':
    case 'K': v *= 1024; break;
    case 'm':
    case 'M': v *= 1024 * 1024; break;
    case 'g':
    case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<std::size_t>(v);
}

template <class E>
E lookup(const std::string& name, const char* what, int count) {
  for (int i = 0; i < count; ++i)
    if (name == gnio::to_string(static_cast<E>(i))) return static_cast<E>(i);
  std::fprintf(stderr, "coll_bench: unknown %s '%s'\n", what, name.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "coll_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--coll")
      o.coll = next();
    else if (a == "--type")
      o.type = next();
    else if (a == "--op")
      o.op = next();
    else if (a == "--algo")
      o.algo = next();
    else if (a == "--min")
      o.min = parse_size(next());
    else if (a == "--max")
      o.max = parse_size(next());
    else if (a == "--iters")
      o.iters = std::atoi(next());
    else if (a == "--warmup")
      o.warmup = std::atoi(next());
    else if (a == "--eager")
      o.eager = true;
    else if (a == "--private")
      o.priv = true;
    else if (a == "--inplace")
      o.inplace = true;
    else {
      std::fprintf(stderr, "coll_bench: unknown argument %s (see the file comment)\n", a.c_str());
      return 2;
    }
  }
  try {
    gnio::Comm comm = gnio::Comm::from_env();
    gnio::Stream stream(comm);
    const int n = comm.size(), me = comm.rank();
    const auto kind = lookup<gnio::CollKind>(o.coll, "collective", gnio::kCollKindCount);
    const auto type = lookup<gnio::DataType>(o.type, "type", gnio::kDataTypeCount);
    const auto op = lookup<gnio::RedOp>(o.op, "operator", gnio::kRedOpCount);
    if (kind == gnio::CollKind::AllToAllV) {
      std::fprintf(stderr, "coll_bench: alltoallv is not benchmarked here\n");
      return 2;
    }
    gnio::coll_set_algorithm(comm, o.algo);
    const bool graph = !o.eager && comm.backend() == gnio::Backend::Cuda;
    const std::size_t es = gnio::size_of(type);
    const bool gathered = kind == gnio::CollKind::ReduceScatter ||
                          kind == gnio::CollKind::AllGather || kind == gnio::CollKind::AllToAll;
    const double factor = kind == gnio::CollKind::AllReduce ? 2.0 * (n - 1) / n
                          : gathered                        ? 1.0 * (n - 1) / n
                                                            : 1.0;
    const std::size_t cap = o.max + 4096;
    gnio::SymPtr<char> sym[2];
    char* priv[2] = {};
    char* buf[2];
    for (int i = 0; i < 2; ++i) {
      if (o.priv)
        buf[i] = priv[i] = static_cast<char*>(comm.alloc_device(cap));
      else
        buf[i] = comm.local(sym[i] = comm.alloc_bytes(cap));
      comm.fill(buf[i], 1, cap, stream);  // bytes 0x01: finite values of every type
    }
    comm.synchronize(stream);
    gnio::coll_prepare(comm, stream);
    if (me == 0)
      std::printf(
          "# gnio %s %s %s algo %s, %d ranks, %s, %s buffers, %s\n#%12s %12s %8s %10s %10s %10s\n",
          o.coll.c_str(), o.type.c_str(), o.op.c_str(), o.algo.c_str(), n,
          graph ? "CUDA graph of the iterations" : "eager", o.priv ? "private" : "symmetric",
          o.inplace ? "in place" : "out of place", "bytes", "count", "algo", "time(us)",
          "algbw(GB/s)", "busbw(GB/s)");
    for (std::size_t bytes = o.min; bytes <= o.max; bytes *= 2) {
      // count: elements per rank as the API defines it; bytes = the larger buffer.
      const std::size_t count = std::max<std::size_t>(1, bytes / es / (gathered ? n : 1));
      char* send = buf[0];
      char* recv = o.inplace ? buf[0] : buf[1];
      if (o.inplace && kind == gnio::CollKind::ReduceScatter) recv = send + me * count * es;
      if (o.inplace && kind == gnio::CollKind::AllGather) send = recv + me * count * es;
      auto one = [&] {
        switch (kind) {
          case gnio::CollKind::AllReduce:
            gnio::allreduce(comm, send, recv, count, type, op, stream);
            break;
          case gnio::CollKind::ReduceScatter:
            gnio::reduce_scatter(comm, send, recv, count, type, op, stream);
            break;
          case gnio::CollKind::AllGather:
            gnio::allgather(comm, send, recv, count, type, stream);
            break;
          case gnio::CollKind::Broadcast:
            gnio::broadcast(comm, send, recv, count, type, 0, stream);
            break;
          case gnio::CollKind::Reduce:
            gnio::reduce(comm, send, recv, count, type, op, 0, stream);
            break;
          default: gnio::alltoall(comm, send, recv, count, type, stream); break;
        }
      };
      for (int k = 0; k < o.warmup; ++k) one();
      comm.synchronize(stream);
      comm.bootstrap().barrier();
      double us = 0;
#if defined(__CUDACC__)
      if (graph) {
        cudaStream_t s = stream.cuda();
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        for (int k = 0; k < o.iters; ++k) one();
        cudaStreamEndCapture(s, &g);
        cudaGraphInstantiate(&ge, g, 0);
        cudaGraphLaunch(ge, s);  // warm the graph
        comm.synchronize(stream);
        comm.bootstrap().barrier();
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cudaEventRecord(e0, s);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(e1, s);
        comm.synchronize(stream);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        us = ms * 1000.0 / o.iters;
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
      }
#endif
      if (!graph) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < o.iters; ++k) one();
        comm.synchronize(stream);
        us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                 .count() /
             o.iters;
      }
      const std::size_t moved = count * es * (gathered ? n : 1);
      const double algbw = moved / us / 1e3;
      if (me == 0)
        std::printf("%13zu %12zu %8s %10.2f %10.2f %10.2f\n", moved, count,
                    gnio::to_string(gnio::coll_algorithm(comm, kind, count, type)), us, algbw,
                    algbw * factor);
      std::fflush(stdout);
    }
    for (int i = 0; i < 2; ++i) {
      if (o.priv)
        comm.free_device(priv[i]);
      else
        comm.free(sym[i]);
    }
  } catch (const gnio::Error& e) {
    std::fprintf(stderr, "coll_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
