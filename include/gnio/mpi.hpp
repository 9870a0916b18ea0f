// A gnio communicator over the ranks of an MPI communicator, for programs that already use MPI
// (NVSHMEM's nvshmemx_init_attr with an MPI communicator, NCCL's unique id over MPI_Bcast):
//
//   #include <mpi.h>
//   #include <gnio/mpi.hpp>
//   MPI_Init(&argc, &argv);
//   gnio::Comm world = gnio::comm_from_mpi(MPI_COMM_WORLD);
//   MPI_Comm half;
//   MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
//   gnio::Comm sub = gnio::comm_from_mpi(half);   // ranks and order of `half`
//
// Header only: it is compiled with the program's own MPI (any implementation), so libgnio neither
// needs MPI to build nor links it. Rank 0 of the MPI communicator creates a unique id and
// broadcasts it; every rank then joins as its MPI rank (gnio's bootstrap runs over TCP beside
// MPI, as with Comm::from_unique_id). Include <mpi.h> first.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>

#include "gnio/bootstrap.hpp"
#include "gnio/comm.hpp"
#include "gnio/error.hpp"

namespace gnio {

/// A communicator of the ranks of `mpi_comm`, rank for rank (gnio rank i = MPI rank i).
/// Collective over `mpi_comm`: every member calls it, MPI initialised. Throws
/// Error(InvalidArgument) for MPI_COMM_NULL or an inter-communicator, Error(SystemError) naming
/// the MPI call when one fails (under an MPI error handler that returns), and whatever
/// Comm::from_unique_id throws.
inline Comm comm_from_mpi(MPI_Comm mpi_comm, const CommOptions& options = {}) {
  if (mpi_comm == MPI_COMM_NULL)
    throw Error(ErrorClass::InvalidArgument,
                "comm_from_mpi: the MPI communicator is MPI_COMM_NULL");
  int inter = 0;
  auto check = [](int rc, const char* call) {
    if (rc != MPI_SUCCESS)
      throw Error(ErrorClass::SystemError, std::string("comm_from_mpi: ") + call +
                                               " failed (MPI error " + std::to_string(rc) + ")");
  };
  check(MPI_Comm_test_inter(mpi_comm, &inter), "MPI_Comm_test_inter");
  if (inter)
    throw Error(ErrorClass::InvalidArgument,
                "comm_from_mpi: an inter-communicator has no single rank order; pass an "
                "intra-communicator (MPI_Intercomm_merge)");
  int rank = 0, size = 0;
  check(MPI_Comm_rank(mpi_comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(mpi_comm, &size), "MPI_Comm_size");
  // Rank 0 broadcasts even when it cannot make an id (all zero bytes), so that no rank waits
  // in MPI_Bcast for one that never comes; it then rethrows its own error.
  UniqueId id{};
  std::exception_ptr failed;
  if (rank == 0) {
    try {
      id = create_unique_id();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  check(MPI_Bcast(id.bytes, static_cast<int>(sizeof(id.bytes)), MPI_BYTE, 0, mpi_comm),
        "MPI_Bcast of the unique id");
  if (failed) std::rethrow_exception(failed);
  bool any = false;
  for (unsigned char b : id.bytes) any = any || b != 0;
  if (!any)
    throw Error(ErrorClass::RemoteError,
                "comm_from_mpi: rank 0 of the MPI communicator could not create a unique id (its "
                "error says why)");
  return Comm::from_unique_id(id, rank, size, options);
}

}  // namespace gnio
