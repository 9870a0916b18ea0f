// gnio::comm_from_mpi (gnio/mpi.hpp) in an MPI program: a communicator over MPI_COMM_WORLD and
// one over each half of an MPI_Comm_split (odd ranks in reverse order), each running an int32
// allreduce whose every element is checked against the exact sum; poisoned output first. Run
// with mpirun -np 3 (or more). Prints "mpi_comm_test: ok" on rank 0 and exits 0 when every rank
// passed; exits 1 otherwise.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/mpi.hpp"

namespace {

constexpr std::size_t kCount = 4099;

/// Allreduce of `count` int32 where member m contributes value(key_m, i); true when every
/// element equals the sum over `keys` (the members' keys, in any order).
bool allreduce_checked(gnio::Comm& comm, int key, const std::vector<int>& keys, const char* what) {
  auto value = [](int k, std::size_t i) {
    return static_cast<std::int32_t>((k + 1) * 1000 + static_cast<int>(i % 997));
  };
  std::vector<std::int32_t> in(kCount), out(kCount, -7);
  for (std::size_t i = 0; i < kCount; ++i) in[i] = value(key, i);
  gnio::Stream stream(comm);
  void* send = comm.alloc_device(kCount * 4);
  void* recv = comm.alloc_device(kCount * 4);
  comm.copy(send, in.data(), kCount * 4, stream);
  comm.copy(recv, out.data(), kCount * 4, stream);  // poison: -7 is no possible sum
  gnio::allreduce(comm, send, recv, kCount, gnio::DataType::I32, gnio::RedOp::Sum, stream);
  comm.copy(out.data(), recv, kCount * 4, stream);
  comm.synchronize(stream);
  comm.free_device(send);
  comm.free_device(recv);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    std::int32_t expected = 0;
    for (int k : keys) expected += value(k, i);
    if (out[i] != expected && wrong++ < 3)
      std::fprintf(stderr, "%s: rank %d element %zu is %d, expected %d\n", what, comm.rank(), i,
                   out[i], expected);
  }
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ok = 1;
  try {
    gnio::Comm world = gnio::comm_from_mpi(MPI_COMM_WORLD);
    if (world.rank() != rank || world.size() != size) {
      std::fprintf(stderr, "world: gnio rank %d of %d, MPI rank %d of %d\n", world.rank(),
                   world.size(), rank, size);
      ok = 0;
    }
    std::vector<int> all;
    for (int r = 0; r < size; ++r) all.push_back(r);
    ok &= allreduce_checked(world, rank, all, "MPI_COMM_WORLD");

    // Even ranks in order, odd ranks reversed: the gnio ranks must follow the MPI ranks.
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank % 2 ? size - rank : rank, &half);
    int half_rank = 0, half_size = 0;
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);
    {
      gnio::Comm sub = gnio::comm_from_mpi(half);
      if (sub.rank() != half_rank || sub.size() != half_size) {
        std::fprintf(stderr, "split: gnio rank %d of %d, MPI rank %d of %d\n", sub.rank(),
                     sub.size(), half_rank, half_size);
        ok = 0;
      }
      std::vector<int> members;
      for (int r = rank % 2; r < size; r += 2) members.push_back(r);
      ok &= allreduce_checked(sub, rank, members, "split");
    }
    MPI_Comm_free(&half);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    ok = 0;
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_comm_test: %s\n", all_ok ? "ok" : "FAILED");
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
