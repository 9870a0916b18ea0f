// Communicator creation time: gnio::Comm::from_unique_id against ncclCommInitRank, both from a
// unique id broadcast beforehand, both on the same GPUs in the same run. The CUDA context exists
// before either is timed (it costs the same for both). Each figure is the slowest rank's time;
// the table gives the median and range over the repetitions.
//
// Comm::from_env() is timed too, through whatever launcher started the job (its rendezvous
// included), so that launchers compare in the same run:
//
//   gnio-run -n 2 -- init_bench [repetitions]
//   mpirun -np 2 init_bench [repetitions] [--no-nccl]   (--no-nccl: gnio only, e.g. when NCCL
//                                                       refuses two ranks on one GPU)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/creation_timing.hpp"
#include "harness/nccl_dl.hpp"
#include "gnio/comm.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

using gnio_bench::max_over_ranks;
using gnio_bench::now_ms;
using gnio_bench::summarize;
using gnio_bench::Summary;

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const bool with_nccl = !(argc > 2 && std::string(argv[2]) == "--no-nccl");
  (void)with_nccl;  // used only where the CUDA build can run NCCL
  // The coordinating communicator: also creates the CUDA context, which is not what we time.
  gnio::Comm coord = gnio::Comm::from_env();
  gnio::Bootstrap& bs = coord.bootstrap();
  const int rank = coord.rank(), size = coord.size();
  const std::vector<double> gnio_ms = gnio_bench::time_creation_from_unique_id(bs, reps);
  std::vector<double> nccl_ms;
  // Comm::from_env() as the launcher starts it (gnio-run, torchrun, mpirun through PMIx, a
  // rendezvous file): the same creation plus the launcher's rendezvous.
  std::vector<double> env_ms;
  std::string env_problem;
  for (int r = 0; r < reps && env_problem.empty(); ++r) {
    bs.barrier();
    double t0 = now_ms();
    try {
      gnio::Comm c = gnio::Comm::from_env();
      env_ms.push_back(max_over_ranks(bs, now_ms() - t0));
    } catch (const gnio::Error& e) {
      env_problem = e.what();
    }
    bs.barrier();
  }
  std::string nccl_version = "not run";
  gnio_bench::Nccl nccl;
#if defined(__CUDACC__)
  if (!with_nccl) {
    nccl_version = "not run (--no-nccl)";
  } else if (coord.backend() == gnio::Backend::Cuda && nccl.ok()) {
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
    std::printf(
        "# communicator creation, %d ranks, backend %s, %d repetitions (slowest rank per "
        "repetition)\n",
        size, gnio::to_string(coord.backend()), reps);
    std::printf("# NCCL: %s\n", nccl_version.c_str());
    std::printf("%-34s %10s %10s %10s\n", "what", "median ms", "min ms", "max ms");
    std::printf("%-34s %10.2f %10.2f %10.2f\n", "gnio Comm::from_unique_id", g.median, g.min,
                g.max);
    if (!env_ms.empty()) {
      Summary e = summarize(env_ms);
      const std::string what = "gnio Comm::from_env (" + coord.launch_source() + ")";
      std::printf("%-34s %10.2f %10.2f %10.2f\n", what.c_str(), e.median, e.min, e.max);
    } else {
      std::printf("gnio Comm::from_env: %s\n", env_problem.c_str());
    }
    if (!nccl_ms.empty()) {
      Summary n = summarize(nccl_ms);
      std::printf("%-34s %10.2f %10.2f %10.2f\n", "ncclCommInitRank", n.median, n.min, n.max);
      std::printf("ratio (NCCL / gnio, > 1 = gnio faster): %.2f\n", n.median / g.median);
    }
  }
  return 0;
}
