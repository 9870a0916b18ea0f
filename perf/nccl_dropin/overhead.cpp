// Per-call overhead of the NCCL drop-in over gnio's own call: the same allreduce (eager: each call
// waits for its result, as the host backend's NULL stream does) through ncclAllReduce and through
// gnio::allreduce + Comm::synchronize, interleaved in rounds, medians of the rounds.
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
  std::printf(
      "# per-call time of an eager allreduce, %d ranks, backend %s, median of %d rounds of "
      "%d calls\n",
      comm.size(), gnio::to_string(comm.backend()), rounds, calls);
  std::printf("%10s %14s %14s %14s\n", "bytes", "gnio us", "drop-in us", "overhead us");
  for (std::size_t count : {std::size_t{0}, std::size_t{2}, std::size_t{256}, std::size_t{16384}}) {
    std::vector<float> send(count + 1, 1.0f), recv(count + 1, 0.0f);
    std::vector<double> own, dropin;
    for (int r = 0; r < rounds + 2; ++r) {  // the first two rounds warm up
      bs.barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        gnio::allreduce(comm, send.data(), recv.data(), count, gnio::DataType::F32,
                        gnio::RedOp::Sum, stream);
        comm.synchronize(stream);
      }
      auto t1 = std::chrono::steady_clock::now();
      bs.barrier();
      auto t2 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i)
        if (ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, nc, nullptr) !=
            ncclSuccess)
          return 1;
      auto t3 = std::chrono::steady_clock::now();
      if (r < 2) continue;
      own.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
      dropin.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count() / calls);
    }
    const double a = median(own), b = median(dropin);
    std::printf("%10zu %14.2f %14.2f %14.2f\n", count * 4, a, b, b - a);
  }
  ncclCommDestroy(nc);
  return 0;
}
