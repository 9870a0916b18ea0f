// Rendezvous through the launcher's PMIx server (Open MPI 4/5 mpirun, Slurm's srun --mpi=pmix,
// PRRTE): rank 0 starts the root and publishes its address under a key of the job; every rank
// meets at a PMIx fence, then reads it. Works across hosts with no address set by the user.
// libpmix is loaded at run time (dlopen "libpmix.so.2"), so libgnio does not depend on it; the
// build needs PMIx's headers (Debian: libpmix-dev) for this path to exist at all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gnio/bootstrap.hpp"

namespace gnio::bootstrap {

/// True when this process was started by a PMIx server (PMIX_NAMESPACE and PMIX_RANK are set).
bool pmix_launched();

/// Why the PMIx rendezvous cannot run here (empty when it can): built without PMIx's headers,
/// or libpmix.so.2 cannot be loaded.
std::string pmix_unavailable_reason();

/// Joins the job described by `info` through PMIx, with job token `token`. Rank 0 starts the
/// root on a loopback port when every rank runs on this host, else on the address
/// create_unique_id() would choose (GNIO_BOOTSTRAP_ADDR, GNIO_SOCKET_IFNAME, the first
/// non-loopback interface), and puts "host port" under the key gnio.bootstrap.root; all ranks
/// fence (bounded by GNIO_BOOTSTRAP_TIMEOUT); the others get rank 0's value and join. Throws
/// Error(SystemError) naming the PMIx call and its status when one fails, Error(Timeout) when
/// the fence does not complete in time.
std::unique_ptr<Bootstrap> join_through_pmix(const LaunchInfo& info, std::uint64_t token);

}  // namespace gnio::bootstrap
