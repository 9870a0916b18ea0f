// Communicator creation time: gnio::Comm::from_unique_id against ncclCommInitRank, both from a
// unique id broadcast beforehand, both on the same GPUs in the same run. The CUDA context exists
// before either is timed (it costs the same for both). Each figure is the slowest rank's time;
// the table gives the median and range over the repetitions.
//
//   gnio-run -n 2 -- init_bench [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/nccl_dl.hpp"
#include "gnio/comm.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The slowest rank's value.
double max_over_ranks(gnio::Bootstrap& bs, double v) {
  std::vector<double> all(bs.size());
  all[bs.rank()] = v;
  bs.allgather(all.data(), sizeof(double));
  return *std::max_element(all.begin(), all.end());
}

struct Summary {
  double median, min, max;
};
Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  // The coordinating communicator: also creates the CUDA context, which is not what we time.
  gnio::Comm coord = gnio::Comm::from_env();
  gnio::Bootstrap& bs = coord.bootstrap();
  const int rank = coord.rank(), size = coord.size();
  std::vector<double> gnio_ms, nccl_ms;
  for (int r = 0; r < reps; ++r) {
    gnio::UniqueId id{};
    if (rank == 0) id = gnio::create_unique_id();
    bs.broadcast(&id, sizeof(id), 0);
    bs.barrier();
    double t0 = now_ms();
    {
      gnio::Comm c = gnio::Comm::from_unique_id(id, rank, size);
      gnio_ms.push_back(max_over_ranks(bs, now_ms() - t0));
    }
    bs.barrier();
  }
  std::string nccl_version = "not run";
  gnio_bench::Nccl nccl;
#if defined(__CUDACC__)
  if (coord.backend() == gnio::Backend::Cuda && nccl.ok()) {
    nccl_version = nccl.version() + " (" + nccl.path() + ")";
    for (int r = 0; r < reps; ++r) {
      gnio_bench::NcclUniqueId id{};
      if (rank == 0) nccl.check(nccl.get_unique_id(&id), "ncclGetUniqueId");
      bs.broadcast(&id, sizeof(id), 0);
      bs.barrier();
      double t0 = now_ms();
      gnio_bench::NcclComm comm = nullptr;
      nccl.check(nccl.comm_init_rank(&comm, size, id, rank), "ncclCommInitRank");
      cudaDeviceSynchronize();
      nccl_ms.push_back(max_over_ranks(bs, now_ms() - t0));
      nccl.check(nccl.comm_destroy(comm), "ncclCommDestroy");
      bs.barrier();
    }
  } else if (!nccl.ok()) {
    nccl_version = "unavailable: " + nccl.error();
  }
#endif
  if (rank == 0) {
    Summary g = summarize(gnio_ms);
    std::printf("# communicator creation, %d ranks, backend %s, %d repetitions (slowest rank per repetition)\n",
                size, gnio::to_string(coord.backend()), reps);
    std::printf("# NCCL: %s\n", nccl_version.c_str());
    std::printf("%-28s %10s %10s %10s\n", "what", "median ms", "min ms", "max ms");
    std::printf("%-28s %10.2f %10.2f %10.2f\n", "gnio Comm::from_unique_id", g.median, g.min, g.max);
    if (!nccl_ms.empty()) {
      Summary n = summarize(nccl_ms);
      std::printf("%-28s %10.2f %10.2f %10.2f\n", "ncclCommInitRank", n.median, n.min, n.max);
      std::printf("ratio (NCCL / gnio, > 1 = gnio faster): %.2f\n", n.median / g.median);
    }
  }
  return 0;
}
