// Comm: a communicator — the ranks of one job, the platform backend each uses (GPU or host), the
// symmetric heap they share, and the handle kernels use (DeviceComm). Creating and destroying a
// Comm are collective over all its ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/device/device_comm.hpp"
#include "gnio/device/sym_ptr.hpp"
#include "gnio/device/team.hpp"
#include "gnio/error.hpp"
#include "gnio/stream.hpp"
#include "gnio/window.hpp"

namespace gnio {

/// Which platform backend a communicator runs on.
enum class Backend {
  Auto,  ///< cuda when a GPU is visible and the cuda backend is compiled in, else host
  Cuda,  ///< real GPUs
  Host,  ///< CPU threads and shared memory (no GPU needed)
};

const char* to_string(Backend b) noexcept;

/// Options of Comm creation; the defaults come from the environment (GNIO_BACKEND, GNIO_DEVICE).
struct CommOptions {
  Backend backend = Backend::Auto;  ///< Auto defers to GNIO_BACKEND
  int device = -1;                  ///< GPU ordinal; -1 defers to GNIO_DEVICE / LOCAL_RANK
};

/// Memory a communicator holds on this rank.
struct MemoryStats {
  std::size_t heap_mapped = 0;         ///< symmetric heap bytes backed by memory, this rank
  std::size_t heap_in_use = 0;         ///< of which allocated to live objects (user + internal)
  std::size_t heap_internal = 0;       ///< of which gnio's own (team flags, tables)
  std::size_t heap_reserved_va = 0;    ///< virtual address space reserved for all node peers' heaps
  std::size_t peer_mapped = 0;         ///< node peers' heap bytes mapped into this process
  std::size_t host_pinned = 0;         ///< page-locked host memory (control words)
  std::size_t windows = 0;             ///< live registered windows (register_buffer)
  std::size_t window_bytes = 0;        ///< bytes this rank registered in them (the user's memory)
  std::size_t window_peer_mapped = 0;  ///< node peers' registered bytes mapped into this process
  std::size_t device_tables = 0;       ///< device memory of address tables (windows, IPC heap)
};

/// A communicator. Movable; copies share the same communicator (it is destroyed with the last).
class Comm {
 public:
  /// Joins the job described by the launcher's environment (gnio-run, torchrun, Open MPI, Slurm,
  /// PMI; see launch_info_from_env). Collective.
  static Comm from_env(const CommOptions& options = {});
  /// Joins the job named by `id` as `rank` of `size` (NCCL style). Collective.
  static Comm from_unique_id(const UniqueId& id, int rank, int size,
                             const CommOptions& options = {});

  Comm(Comm&&) noexcept;
  Comm& operator=(Comm&&) noexcept;
  Comm(const Comm&);
  Comm& operator=(const Comm&);
  /// Destroys the communicator when this is the last copy. Collective: waits for this rank's
  /// device work, then for every rank, before unmapping memory a peer might still write.
  ~Comm();

  int rank() const noexcept;
  int size() const noexcept;
  /// Index of this rank among the ranks of its node, and their number.
  int local_rank() const noexcept;
  int local_size() const noexcept;
  /// Index of this rank's node (0 .. nodes()-1, in order of the nodes' first ranks).
  int node() const noexcept;
  int nodes() const noexcept;
  /// The node identity string (GNIO_NODE_ID, or host name + boot id).
  const std::string& node_id() const noexcept;
  /// World ranks on this node, ascending.
  const std::vector<int>& node_ranks() const noexcept;
  /// The backend in use (never Auto).
  Backend backend() const noexcept;
  /// The GPU ordinal in use, or -1 on the host backend.
  int device() const noexcept;
  /// One line describing the device.
  std::string device_description() const;
  /// Where rank and size came from ("gnio-run", "torchrun", "unique-id", ...).
  const std::string& launch_source() const noexcept;

  /// The out-of-band channel (for applications that need a small exchange of their own).
  Bootstrap& bootstrap() const;

  // ---- symmetric memory -----------------------------------------------------------------
  /// Allocates `count` elements in the symmetric heap. Collective: every rank must call with the
  /// same count (checked: mismatches throw InvalidArgument on every rank, with no effect). The
  /// result has the same offset on every rank; the memory is not cleared. 256-byte aligned.
  template <class T>
  SymPtr<T> alloc(std::size_t count) {
    return alloc_bytes(count * sizeof(T), alignof(T) > 256 ? alignof(T) : 256).template cast<T>();
  }
  SymPtr<char> alloc_bytes(std::size_t bytes, std::size_t align = 256);
  /// Frees a symmetric allocation. Collective; waits for this rank's device work and for every
  /// rank first. Null pointers are ignored; double frees throw InvalidArgument.
  template <class T>
  void free(SymPtr<T> p) {
    free_bytes(p.template cast<char>());
  }
  void free_bytes(SymPtr<char> p);
  /// This rank's address of a symmetric object (device memory on the cuda backend).
  template <class T>
  T* local(SymPtr<T> p) const {
    return static_cast<T*>(local_address(p.template cast<char>()));
  }
  /// A node peer's copy of a symmetric object as an address this rank can use (nullptr when the
  /// peer is on another node).
  template <class T>
  T* peer(SymPtr<T> p, int peer_rank) const {
    return static_cast<T*>(peer_address(p.template cast<char>(), peer_rank));
  }
  void* local_address(SymPtr<char> p) const;
  void* peer_address(SymPtr<char> p, int peer_rank) const;

  /// How node peers map the symmetric heap: "memfd" (host backend), "vmm" (CUDA VMM chunks shared
  /// as POSIX fds; grows up to GNIO_HEAP_MAX) or "ipc" (legacy CUDA IPC; fixed at GNIO_HEAP_SIZE).
  const char* heap_mapping() const noexcept;

  // ---- registered user buffers (zero-copy) ------------------------------------------------
  /// Registers this rank's buffer [ptr, ptr + bytes) so that node peers map it and kernels reach
  /// it through Window::device_handle() (see gnio/window.hpp for the lifetime rules). Collective
  /// over all ranks; each rank passes its own buffer (sizes and addresses may differ; 0 bytes is
  /// allowed). Accepted memory: on the host backend, Comm::alloc_device() memory; on the cuda
  /// backend, device memory of this rank's GPU from cudaMalloc (Comm::alloc_device) or from
  /// cuMemCreate with POSIX-fd export allowed; the range must lie inside one allocation. Anything
  /// else on any rank throws InvalidArgument on every rank, with no effect. The memory is not
  /// copied: keep it allocated until the window is deregistered.
  Window register_buffer(void* ptr, std::size_t bytes);
  /// Deregisters `window` and leaves it empty (other copies become invalid). Collective, in the
  /// same order on every rank: waits for this rank's device work and for every rank, unmaps the
  /// peers' buffers, and returns once every rank has, so the buffer may be freed afterwards.
  /// Ranks naming different windows throw InvalidArgument everywhere, with no effect. An empty or
  /// already deregistered window is ignored (no collective).
  void deregister(Window& window);

  /// Private (non-symmetric) device memory of this rank on its backend; free with free_device.
  void* alloc_device(std::size_t bytes);
  void free_device(void* p);
  /// Copies bytes between any two addresses this rank can reach, in stream order.
  void copy(void* dst, const void* src, std::size_t bytes, StreamRef stream);
  /// Fills bytes, in stream order.
  void fill(void* dst, int value, std::size_t bytes, StreamRef stream);

  MemoryStats memory_stats() const;

  // ---- teams ------------------------------------------------------------------------------
  /// All ranks.
  const Team& world() const noexcept;
  /// The ranks of this node.
  const Team& node_team() const noexcept;
  /// Members of `parent` with the same `color` form a team, ordered by (key, parent index).
  /// color < 0: this rank joins no team (the result has index -1). Collective over all ranks.
  Team split(const Team& parent, int color, int key);
  /// The members start, start+stride, ... (size of them) of `parent`. Collective over all ranks.
  Team split_strided(const Team& parent, int start, int stride, int size);

  // ---- kernels ----------------------------------------------------------------------------
  /// The handle kernels take by value (every host object with a device side names it
  /// device_handle()). Fetch it again after alloc() grew the heap.
  DeviceComm device_handle() const;
  /// Same as device_handle() (its name before the convention; kept for existing code).
  DeviceComm device_comm() const { return device_handle(); }

  /// Throws the error a device operation recorded (Timeout naming rank, peer, address, expected
  /// and seen value, call site; Unsupported; InvalidArgument), or RemoteError/abort state.
  /// A rank that died or became unreachable (docs/guide/failures.md) comes first: RemoteError
  /// naming it ("rank 3 (host pid 123) died or became unreachable: ..."), also from alloc, free,
  /// register_buffer, split and every bootstrap call made after the loss.
  void check() const;
  /// Waits for `stream`, bounded by GNIO_TIMEOUT plus a margin, checking for device errors while
  /// it waits; throws as check() does, or Timeout when the stream does not drain. After a failure
  /// it still waits (up to 30 s) for the work queued on `stream` to end before throwing, so the
  /// buffers that work uses may be freed once the call returned or threw.
  void synchronize(StreamRef stream) const;
  /// Stops every wait of this communicator (device waits return Status::Aborted, host waits
  /// throw). Callable from any thread. The communicator cannot be used afterwards.
  void abort() noexcept;
  /// True after abort(), a recorded device error, or a lost rank.
  bool aborted() const noexcept;

  /// The implementation (internal).
  const std::shared_ptr<detail::CommImpl>& impl() const noexcept { return impl_; }

 private:
  explicit Comm(std::shared_ptr<detail::CommImpl> impl);
  std::shared_ptr<detail::CommImpl> impl_;
};

}  // namespace gnio
