// Bootstrap: rank discovery and out-of-band exchange (allgather, broadcast, barrier, point to
// point) over TCP, before and beside the fast transports. Every connection carries the job's
// random token; connections without it are dropped and the job goes on. Every wait is bounded by
// GNIO_BOOTSTRAP_TIMEOUT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gnio {

/// An NCCL-style unique id: the root's address and the job's random token. One process creates
/// it (create_unique_id) and the application hands it to every rank (MPI_Bcast, a file,
/// torch.distributed). Plain bytes: safe to copy and send.
struct UniqueId {
  unsigned char bytes[128];
};

/// Creates a unique id and starts the rendezvous service for it in this process (a background
/// thread that exits once all ranks have met or the bootstrap timeout passes). The creating
/// process need not be a rank of the job.
UniqueId create_unique_id();

/// The id as hex text (for files and environment variables) and back. from_string throws
/// Error(InvalidArgument) on malformed text.
std::string to_string(const UniqueId& id);
UniqueId unique_id_from_string(const std::string& text);

/// Who this process is in the job and where that came from.
struct LaunchInfo {
  int rank = -1;
  int size = 0;
  int local_rank = -1;  ///< index among ranks of this node, when the launcher says (else -1)
  int local_size = 0;   ///< ranks on this node, when the launcher says (else 0)
  std::string source;   ///< "unique-id", "gnio-run", "torchrun", "openmpi", "slurm", "pmi"
};

/// Reads rank and size from the launcher's environment, in DESIGN order: gnio-run / torchrun
/// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI
/// (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), PMI (PMI_RANK,
/// PMI_SIZE). Throws Error(InvalidArgument) when none is present or values are inconsistent.
LaunchInfo launch_info_from_env();

/// The out-of-band channel between the ranks of one job.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  /// Joins the job named by `id` as `rank` of `size`. Collective over all ranks.
  static std::unique_ptr<Bootstrap> create(const UniqueId& id, int rank, int size);
  /// Joins the job described by the launcher's environment (launch_info_from_env()); the root is
  /// MASTER_ADDR and GNIO_BOOTSTRAP_PORT (default MASTER_PORT + 1). Collective.
  static std::unique_ptr<Bootstrap> from_env();

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;

  /// `buf` holds size() slots of `bytes` each; slot rank() is this rank's input; on return every
  /// slot holds that rank's input. Collective.
  virtual void allgather(void* buf, std::size_t bytes) = 0;
  /// Copies root's `bytes` at `buf` to every rank's `buf`. Collective.
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  /// Returns once every rank has entered. Collective.
  virtual void barrier() = 0;
  /// Sends `bytes` to `peer`, matched by the peer's recv with the same tag. Messages between a
  /// pair with the same tag arrive in order.
  virtual void send(int peer, int tag, const void* data, std::size_t bytes) = 0;
  /// Receives exactly `bytes` from `peer` sent with `tag`. Throws Error(InvalidArgument) when the
  /// message has another length.
  virtual void recv(int peer, int tag, void* data, std::size_t bytes) = 0;

  /// The job token every connection of this job carries.
  virtual std::uint64_t token() const noexcept = 0;
};

}  // namespace gnio
