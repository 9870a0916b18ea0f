// The platform backend: what differs between real GPUs (cuda) and CPU emulation (host). Everything
// above this layer (memory, transports, collectives) is written once against this interface.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gnio/device/word_ops.hpp"
#include "gnio/stream.hpp"

namespace gnio::platform {

enum class BackendKind { Host, Cuda };

const char* to_string(BackendKind k) noexcept;

/// Physical memory that node peers can map: created by one rank, exported as a file descriptor
/// (host: memfd; cuda: VMM allocation exported as a POSIX fd), passed to peers over a Unix socket,
/// and mapped by everyone at a fixed virtual address.
struct ShareableChunk {
  int fd = -1;            ///< owned by whoever holds the struct; close with close_chunk()
  std::size_t bytes = 0;  ///< multiple of Backend::granularity()
  /// backend's own handle to the local allocation (cuda: CUmemGenericAllocationHandle)
  std::uint64_t handle = 0;
};

/// How a user buffer registered with Comm::register_buffer is shared with node peers.
enum class BufferShareKind : std::uint32_t {
  None = 0,       ///< nothing to share (0 bytes)
  HostMemfd = 1,  ///< host backend: pages of the alloc_device arena's memfd (fd travels)
  CudaIpc = 2,    ///< cuda: cudaMalloc memory, a legacy CUDA IPC handle of the allocation
  CudaVmm = 3,    ///< cuda: CUDA VMM memory, the allocation exported as a POSIX fd (fd travels)
  /// Inside the communicator's symmetric heap, which node peers have mapped already: only the
  /// heap offset travels (ptr_offset). Decided by the window layer, never by a backend.
  SymmetricHeap = 4,
};

/// A user buffer described so that node peers can map it. Plain bytes (it goes through the
/// bootstrap's allgather); the file descriptor of HostMemfd/CudaVmm travels separately, over the
/// node's fd exchange.
struct BufferExport {
  BufferShareKind kind = BufferShareKind::None;
  std::uint32_t reserved = 0;
  std::uint64_t map_offset = 0;  ///< HostMemfd: file offset a peer maps from; otherwise 0
  std::uint64_t map_bytes = 0;   ///< bytes a peer maps (covering pages / the whole allocation)
  std::uint64_t ptr_offset = 0;  ///< where the buffer starts inside that mapping
  std::array<std::byte, 64> ipc_handle{};  ///< CudaIpc: the allocation's cudaIpcMemHandle_t
};

/// What export_buffer() returns: the description plus the fd to pass to peers (-1 if none).
struct ExportedBuffer {
  BufferExport desc;
  int fd = -1;           ///< HostMemfd / CudaVmm; close with release_export()
  bool owns_fd = false;  ///< true when release_export() must close `fd`
};

/// A node peer's buffer mapped into this process by import_buffer().
struct ImportedBuffer {
  void* ptr = nullptr;            ///< the peer's buffer start, as this process addresses it
  void* mapping = nullptr;        ///< what was mapped or opened (release_import() undoes it)
  std::size_t mapping_bytes = 0;  ///< bytes mapped at `mapping`
  BufferShareKind kind = BufferShareKind::None;
  std::uint64_t handle = 0;  ///< cuda VMM: the imported CUmemGenericAllocationHandle
};

/// A handle that lets a node peer open a whole device allocation (cuda: the 64 bytes of a legacy
/// cudaIpcMemHandle_t). Plain bytes, so it can travel through the bootstrap's allgather.
struct IpcHandle {
  std::array<std::byte, 64> bytes{};
};

/// Device memory node peers open by handle: what Backend::ipc_alloc() returns.
struct IpcAllocation {
  void* ptr = nullptr;    ///< device address in this process; release with ipc_free()
  std::size_t bytes = 0;  ///< size as requested
  IpcHandle handle;       ///< what peers pass to ipc_open()
};

/// What Backend::word_atomic does to a word: the one word-operation vocabulary of
/// gnio/device/word_ops.hpp.
using WordOp = gnio::WordOp;

struct DeliveryRing;  // platform/delivery_agent.hpp
struct AgentScratch;  // platform/delivery_agent.hpp

/// What Backend::deliver writes, in this order: data, then a signal word, then a completion mark.
/// Every part is optional (null pointer / zero bytes: skipped).
struct Delivery {
  void* dst = nullptr;        ///< where the data goes (memory this rank's device reaches)
  const void* src = nullptr;  ///< the data: host memory the device reads (alloc_host_mapped)
  std::size_t bytes = 0;
  /// The signal: `op` (Store or Add) with `operand` on the 8-byte word at `word`, with release
  /// order, so whoever sees its new value sees the data.
  std::uint64_t* word = nullptr;
  WordOp op = WordOp::Store;
  std::uint64_t operand = 0;
  /// The completion mark: `mark` stored with release order to `*done` (host-mapped memory) once
  /// the data and the signal are in place; the host polls it instead of synchronizing a stream.
  std::uint64_t* done = nullptr;
  std::uint64_t mark = 0;
};

/// Most deliveries one Backend::deliver_batch() takes, and the most data each of them may carry.
inline constexpr std::size_t kMaxDeliveryBatch = 64;
inline constexpr std::size_t kMaxBatchedDeliveryBytes = std::size_t{4} << 10;

/// True when `d` can be queued: data has both ends, the words are 8-byte aligned (the backends'
/// deliver() refuse anything else).
inline bool well_formed(const Delivery& d) {
  return (d.bytes == 0 || (d.dst && d.src)) &&
         (!d.word || reinterpret_cast<std::uintptr_t>(d.word) % 8 == 0) &&
         (!d.done || reinterpret_cast<std::uintptr_t>(d.done) % 8 == 0);
}

/// Throws InvalidArgument, naming `who` and the first bad entry, unless `count` is at most
/// kMaxDeliveryBatch and every delivery is well formed and carries at most
/// kMaxBatchedDeliveryBytes (what every backend's deliver_batch() requires).
void require_deliverable_batch(const Delivery* d, std::size_t count, const char* who);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const noexcept = 0;
  /// GPU ordinal (cuda) or -1 (host).
  virtual int device() const noexcept = 0;
  /// One line describing the device ("NVIDIA H200, sm_90, 139 GiB" / "host CPU, 2 cores").
  virtual std::string describe() const = 0;

  // ---- symmetric heap memory -------------------------------------------------------------
  /// Size granule of chunks and mappings (host: page size; cuda: VMM recommended granularity).
  virtual std::size_t granularity() const = 0;
  /// Reserves `bytes` of virtual address space, aligned to `align`, with no memory behind it.
  virtual void* reserve(std::size_t bytes, std::size_t align) = 0;
  /// Returns a reservation made by reserve(); all mappings in it must be unmapped first.
  virtual void release(void* va, std::size_t bytes) = 0;
  /// Creates `bytes` of zero-filled physical memory on this rank's device, exportable to node
  /// peers.
  virtual ShareableChunk create_chunk(std::size_t bytes) = 0;
  /// Maps a chunk (this rank's own, or a peer's imported from its fd) at `at` inside a
  /// reservation and makes it readable and writable by this rank's device (on the host backend
  /// also by host code; on cuda the host reaches it only through copy()/fill()).
  /// Does not take ownership of `fd`.
  virtual void map_chunk(void* at, std::size_t bytes, int fd, bool own) = 0;
  /// Unmaps what map_chunk mapped at `at`.
  virtual void unmap_chunk(void* at, std::size_t bytes) = 0;
  /// Frees the local handle of a chunk created by create_chunk (after its mappings are gone)
  /// and closes its fd.
  virtual void close_chunk(ShareableChunk& chunk) = 0;
  /// True when create_chunk()/map_chunk() can share memory with node peers at all (host: always;
  /// cuda: the driver offers VMM with POSIX-fd handles on this GPU, though it may still refuse an
  /// export at create_chunk() time). When false, `why` (if given) receives the reason.
  virtual bool chunks_shareable(std::string* why) const = 0;

  // ---- whole allocations opened by handle (the heap's fallback where chunks are refused) ----
  /// `bytes` (> 0) of zero-filled device memory and a handle node peers open with ipc_open(). The
  /// memory sits where the driver puts it, so peers' copies are not at `base + peer * stride`.
  /// Throws Error(Unsupported) on a backend without such handles (host: chunks always work).
  virtual IpcAllocation ipc_alloc(std::size_t bytes) = 0;
  /// Opens a node peer's ipc_alloc() memory; returns its address in this process. A process
  /// cannot open its own handles.
  virtual void* ipc_open(const IpcHandle& handle) = 0;
  /// Closes what ipc_open() returned. Failures are logged.
  virtual void ipc_close(void* peer_ptr) noexcept = 0;
  /// Frees an ipc_alloc() allocation, after every peer has closed it. Failures are logged.
  virtual void ipc_free(void* ptr) noexcept = 0;

  // ---- user buffers shared with node peers (Comm::register_buffer) -------------------------
  /// Describes [ptr, ptr + bytes) (bytes > 0) so node peers can map it. Accepted memory: host
  /// backend, alloc_device() memory; cuda, device memory of this rank's GPU from cudaMalloc
  /// (legacy IPC) or from cuMemCreate with POSIX-fd export allowed (VMM). The range must lie in
  /// one allocation. Throws Error(InvalidArgument), with nothing held, for anything else.
  virtual ExportedBuffer export_buffer(const void* ptr, std::size_t bytes) = 0;
  /// Releases what export_buffer() holds (the fd it opened, if any). Safe on an empty export.
  virtual void release_export(ExportedBuffer& e) noexcept = 0;
  /// Maps a node peer's exported buffer into this process; `fd` is the descriptor the peer sent
  /// (-1 for CudaIpc) and stays the caller's. Throws Error(SystemError/Unsupported) when the
  /// memory cannot be mapped here (no peer-to-peer path, refused import).
  virtual ImportedBuffer import_buffer(const BufferExport& desc, int fd) = 0;
  /// Unmaps what import_buffer() mapped. Failures are logged.
  virtual void release_import(ImportedBuffer& b) noexcept = 0;

  // ---- host memory the device can reach (flags, error records, proxy rings) -----------------
  /// Page-locked host memory mapped into the device's address space; zero-filled. The same
  /// pointer is valid on the host and in kernels (unified addressing).
  virtual void* alloc_host_mapped(std::size_t bytes) = 0;
  virtual void free_host_mapped(void* p) noexcept = 0;
  /// Makes `bytes` of host memory this process mapped itself at `p` (page-aligned: packet
  /// buffers, rings a socket mapped) reachable by kernels at the same address. Throws
  /// Error(Unsupported) when the device refuses it. The host backend needs nothing.
  virtual void register_host(void* p, std::size_t bytes) = 0;
  virtual void unregister_host(void* p) noexcept = 0;

  // ---- device memory private to this rank --------------------------------------------------
  virtual void* alloc_device(std::size_t bytes) = 0;
  virtual void free_device(void* p) noexcept = 0;

  // ---- streams and copies ----------------------------------------------------------------
  /// Creates a stream; exactly one of the two out-pointers is set.
  virtual void create_stream(CUstream_st** cuda, detail::HostStream** host) = 0;
  virtual void destroy_stream(CUstream_st* cuda, detail::HostStream* host) noexcept = 0;
  /// True when all work queued on the stream has finished (never blocks).
  virtual bool stream_idle(StreamRef s) = 0;
  /// True once all work queued on the stream has finished, false after waiting about `at_most`
  /// for it (never throws on the stream's own errors: stream_synchronize() reports them). Where
  /// the stream's end can wake the caller (host backend) it returns at once when it comes;
  /// elsewhere it polls with short sleeps.
  virtual bool stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) = 0;
  /// Blocks until the stream is idle.
  virtual void stream_synchronize(StreamRef s) = 0;
  /// Copies `n` bytes between any two addresses this rank can reach, in stream order.
  virtual void copy(void* dst, const void* src, std::size_t n, StreamRef s) = 0;
  /// Fills `n` bytes with `value`, in stream order.
  virtual void fill(void* dst, int value, std::size_t n, StreamRef s) = 0;
  /// Waits for all device work of this rank on every stream.
  virtual void device_synchronize() = 0;

  // ---- a word updated from the host, atomically with respect to device code ------------------
  /// Applies `op` to the `width`-byte (4 or 8) naturally aligned word at `word` (memory this
  /// rank's device reaches: its heap, device or host-mapped memory), atomically with respect to
  /// device code updating the same word, in stream order on `s` (after every copy queued before
  /// it, so a signal updated this way is seen only after the data copied ahead of it). Writes the
  /// old value, zero-extended, to `*old` (host-mapped memory; may be null) when `s` reaches it:
  /// synchronize `s` before reading it. This is how a proxy thread applies signals and remote
  /// atomics to GPU memory it cannot address.
  virtual void word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                           std::uint64_t expected, std::uint64_t* old, StreamRef s) = 0;
  /// Queues `d` on `s`: its data, then its signal, then its mark (see Delivery), after everything
  /// queued on `s` before. How a proxy thread hands a received put to GPU memory without waiting
  /// for it: small data costs one kernel launch (no copy engine round, no synchronization).
  virtual void deliver(const Delivery& d, StreamRef s) = 0;
  /// Queues `count` deliveries (at most kMaxDeliveryBatch, each of at most
  /// kMaxBatchedDeliveryBytes) on `s` as one piece of work: every delivery's data, then their
  /// signals in the order given, then the marks; so one kernel launch serves many small puts. The
  /// data of the deliveries may land in any order: the caller makes sure no delivery's data
  /// overlaps another's data or an earlier one's signal word. The deliveries with a mark share
  /// one mark word and give it growing marks (the last is what stays).
  virtual void deliver_batch(const Delivery* d, std::size_t count, StreamRef s) = 0;
  /// Starts the delivery agent (platform/delivery_agent.hpp) on `s`, a stream of its own: it
  /// applies what the proxy thread publishes in `ring` (host-mapped memory) until the host sets
  /// `ring->stop`, and occupies `s` until then. On GPUs one block of kAgentThreads threads, so
  /// kernels that fill the GPU later still find it resident; on the host backend the stream's
  /// thread. `scratch`: what the agent's threads share, alloc_device() memory of this backend
  /// (not block-shared memory: see AgentScratch), used by one agent at a time.
  virtual void start_delivery_agent(DeliveryRing* ring, AgentScratch* scratch, StreamRef s) = 0;
};

/// The host backend (always available).
std::unique_ptr<Backend> make_host_backend();
/// The cuda backend on GPU `device`; throws Error(Unsupported) when not compiled in or when no
/// usable GPU is present.
std::unique_ptr<Backend> make_cuda_backend(int device);
/// Number of usable GPUs (0 without the cuda backend or a driver).
int cuda_device_count() noexcept;
/// True when the library was built with the cuda backend.
bool cuda_backend_compiled() noexcept;

}  // namespace gnio::platform
