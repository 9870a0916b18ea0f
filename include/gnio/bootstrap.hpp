// Bootstrap: rank discovery and out-of-band exchange (allgather, broadcast, barrier, point to
// point) over TCP, before and beside the fast transports. Every connection carries the job's
// random token; connections without it are dropped and the job goes on. Every wait is bounded by
// GNIO_BOOTSTRAP_TIMEOUT.
//
// How it works: a root service (a thread in the process that called create_unique_id(), or in
// rank 0 for from_env()) collects every rank's listener address and hands each rank the full
// table; it then exits. Ranks talk to each other directly over one-way connections opened on
// first use. Collectives run over those connections in log2(size) rounds (Bruck's allgather, or a
// ring when the slots are too large for its messages; binomial-tree broadcast; dissemination
// barrier); each rank has one progress thread that accepts connections and reads incoming
// messages, so senders never wait for the receiving application thread.
//
// Security: the bootstrap is meant for a trusted network. The job token keeps jobs apart and lets
// listeners drop port scanners and stray clients without disturbing the job; it travels in clear
// text and is not a password. Messages are plain bytes, bounded by GNIO_BOOTSTRAP_MAX_MSG; nothing
// received is ever interpreted as code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gnio {

/// An NCCL-style unique id: the root's address and the job's random token. One process creates
/// it (create_unique_id) and the application hands it to every rank (MPI_Bcast, a file,
/// torch.distributed). Plain bytes: safe to copy and send. Layout (versioned, checksummed):
/// magic, version, IPv4/IPv6 address and port of the root, 64-bit token.
struct UniqueId {
  unsigned char bytes[128];
};

/// Creates a unique id and starts the rendezvous service for it in this process (a background
/// thread that exits once all ranks have met, once the ranks' bootstrap timeout passes, or when no
/// rank registers within GNIO_BOOTSTRAP_TIMEOUT). The creating process need not be a rank of the
/// job. The service listens on GNIO_BOOTSTRAP_ADDR, else on the GNIO_SOCKET_IFNAME interface,
/// else on the first non-loopback interface, on a free port. The token comes from the kernel's
/// random generator. Threads still running at process exit are stopped and joined.
UniqueId create_unique_id();

/// The id as 256 lower-case hex digits (for files and environment variables).
std::string to_string(const UniqueId& id);
/// Parses to_string()'s text (either case; surrounding white space ignored). Throws
/// Error(InvalidArgument) on malformed text: wrong length, a non-hex character, or bytes that are
/// not a gnio unique id of this version (checksum, magic).
UniqueId unique_id_from_string(const std::string& text);

/// Who this process is in the job and where that came from.
struct LaunchInfo {
  int rank = -1;
  int size = 0;
  int local_rank = -1;  ///< index among ranks of this node, when the launcher says (else -1)
  int local_size = 0;   ///< ranks on this node, when the launcher says (else 0)
  std::string source;   ///< "unique-id", "gnio-run", "torchrun", "openmpi", "slurm", "pmi"
  /// Host (name or IP) of the bootstrap root, empty when the environment does not say: MASTER_ADDR;
  /// for Open MPI, Slurm and PMI (which have no such variable) MASTER_ADDR, else
  /// GNIO_BOOTSTRAP_ADDR.
  std::string root_host;
  /// Port of the bootstrap root, 0 when the environment does not say: GNIO_BOOTSTRAP_PORT when
  /// set (non-zero), else MASTER_PORT + 1 for gnio-run/torchrun (MASTER_PORT itself belongs to
  /// torch's TCPStore), else MASTER_PORT for Open MPI, Slurm and PMI.
  int root_port = 0;
};

/// Reads rank and size from the launcher's environment, in DESIGN order:
///  1. gnio-run / torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
///     MASTER_PORT ("torchrun" when TORCHELASTIC_RUN_ID is set or GNIO_JOB_TOKEN is not,
///     else "gnio-run");
///  2. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
///  3. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the tasks on this node from
///     SLURM_STEP_TASKS_PER_NODE (with SLURM_NODEID; "2(x3),1" forms are understood) or a plain
///     SLURM_NTASKS_PER_NODE;
///  4. PMI (MPICH/Hydra, Intel MPI): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS.
/// Open MPI, Slurm and PMI do not publish a rendezvous address: from_env() meets through the
/// launcher's PMIx server when there is one (any number of hosts), else on the loopback when every
/// rank runs on one host (docs/guide/launching.md); otherwise set MASTER_ADDR (or
/// GNIO_BOOTSTRAP_ADDR) to rank 0's host and GNIO_BOOTSTRAP_PORT (or MASTER_PORT) to a free port
/// there. This function only reports them.
/// Throws Error(InvalidArgument) naming the variable when none of the sources is present, a value
/// is not an integer, or values are inconsistent (rank >= size, negative, local rank >= local
/// size, a port outside 1..65535).
LaunchInfo launch_info_from_env();

/// The out-of-band channel between the ranks of one job.
///
/// Thread safety:
///  * send() and recv() may be called from several threads at once. Each message is written
///    whole under a per-peer lock, so concurrent senders never interleave bytes; messages from one
///    sender to one peer with one tag arrive in the order they were sent (from one thread; the
///    order between threads racing on the same (peer, tag) is whichever send went first).
///    Two threads receiving the same (peer, tag) each get a whole message.
///  * Collectives (allgather, broadcast, barrier) may run concurrently with send()/recv() on other
///    threads (they use their own message space), but must be called by one thread at a time and
///    in the same order on every rank.
///  * The destructor must not run while another thread is inside a call.
///
/// Failures: every call throws gnio::Error. Timeout when GNIO_BOOTSTRAP_TIMEOUT passes (the
/// message names the rank waited for); RemoteError when a peer's connection closes or a peer
/// aborted. A collective that fails tells every peer it can reach (an Abort message), and after
/// that every call on every reached rank throws RemoteError: the bootstrap is a job-wide channel
/// and a job with a failed rank must be torn down. InvalidArgument (bad pointer, size, rank, tag
/// length mismatch in recv) has no effect.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  /// Joins the job named by `id` as `rank` of `size`. Collective over all ranks: returns once
  /// every rank has registered with the root, or throws Error(Timeout) naming the ranks that never
  /// arrived, Error(InvalidArgument) for a bad id/rank/size or a rank/size conflict with other
  /// ranks.
  static std::unique_ptr<Bootstrap> create(const UniqueId& id, int rank, int size);
  /// Joins the job described by the launcher's environment (launch_info_from_env()); the root is
  /// root_host:root_port (MASTER_ADDR and GNIO_BOOTSTRAP_PORT, default MASTER_PORT + 1), hosted
  /// by rank 0 itself. The job token is GNIO_JOB_TOKEN (hex, set by gnio-run) or else derived from
  /// the launcher's job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID + SLURM_STEP_ID,
  /// OMPI_MCA_orte_ess_jobid / PMIX_NAMESPACE) and the root address. An Open MPI, Slurm or PMI
  /// job without an address meets through the launcher's PMIx server (PMIX_NAMESPACE set; rank 0
  /// publishes the root's address, all fence, the others read it), else, when its ranks all run
  /// on this host, on the loopback through a rendezvous file (GNIO_RENDEZVOUS_DIR;
  /// docs/guide/launching.md). Collective.
  static std::unique_ptr<Bootstrap> from_env();

  /// This process's rank.
  virtual int rank() const noexcept = 0;
  /// Number of ranks in the job.
  virtual int size() const noexcept = 0;

  /// `buf` holds size() slots of `bytes` each; slot rank() is this rank's input; on return every
  /// slot holds that rank's input. Collective. `bytes` may not exceed GNIO_BOOTSTRAP_MAX_MSG and
  /// must be equal on every rank.
  virtual void allgather(void* buf, std::size_t bytes) = 0;
  /// Copies root's `bytes` at `buf` to every rank's `buf`. Collective.
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  /// Returns once every rank has entered. Collective.
  virtual void barrier() = 0;
  /// Sends `bytes` to `peer`, matched by the peer's recv with the same tag. Messages between a
  /// pair with the same tag arrive in order. Returns once the message is handed to the kernel
  /// (the peer's progress thread receives it even while its application is busy). A peer may be
  /// this rank itself.
  virtual void send(int peer, int tag, const void* data, std::size_t bytes) = 0;
  /// Receives exactly `bytes` from `peer` sent with `tag`. Throws Error(InvalidArgument) when the
  /// message has another length (the message stays queued).
  virtual void recv(int peer, int tag, void* data, std::size_t bytes) = 0;

  /// The job token every connection of this job carries.
  virtual std::uint64_t token() const noexcept = 0;
};

}  // namespace gnio
