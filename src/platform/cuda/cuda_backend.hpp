// The cuda platform backend: one GPU per rank. Symmetric-heap chunks are CUDA VMM allocations
// exported as POSIX file descriptors (passed to node peers over a Unix socket and mapped at fixed
// addresses); legacy CUDA IPC handles are the fallback where fd export is refused. See
// docs/design/platform-cuda.md.
//
// CudaBackend's members are defined by concept: cuda_backend.cpp (construction, teardown),
// cuda_backend_memory.cpp (heap chunks, legacy CUDA IPC, host-mapped and private device memory),
// cuda_backend_buffers.cpp (user buffers shared with node peers) and cuda_backend_streams.cpp
// (streams, copies, word atomics, deliveries).
//
// This header is plain C++ (no CUDA headers); it is private to src/platform/: the layers above
// reach everything through platform::Backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "platform/backend.hpp"

namespace gnio::platform {

/// The cuda backend on one GPU. Every method makes the backend's GPU current on the calling
/// thread for the duration of the call (and restores the caller's device), so the backend may be
/// used from any thread; the constructor leaves the GPU current on the constructing thread, so
/// that the application's own kernels land on the rank's GPU. Thread-safe.
class CudaBackend final : public Backend {
 public:
  /// Sets `device` current and checks that it can run gnio: compute capability 7.0 or newer,
  /// unified addressing, host memory mapping. Throws Error(InvalidArgument) for an ordinal out of
  /// range, Error(Unsupported) without a driver or for an unsuitable GPU.
  explicit CudaBackend(int device);
  /// Releases whatever the owner left mapped, reserved or created (logged), then nothing else:
  /// the CUDA context stays for other users in the process.
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  BackendKind kind() const noexcept override { return BackendKind::Cuda; }
  int device() const noexcept override { return device_; }
  /// "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB, PCI 0000:00:06.0".
  std::string describe() const override { return description_; }

  // ---- symmetric heap (CUDA VMM) --------------------------------------------------------
  /// The VMM recommended granularity for an fd-exportable allocation on this GPU (2 MiB on
  /// Hopper). Without VMM support, 2 MiB, the granule of cudaMalloc and thus of ipc_alloc().
  std::size_t granularity() const override { return granularity_; }
  /// cuMemAddressReserve. `bytes` is rounded up to granularity(); `align` (a power of two, 0 =
  /// granularity()) is raised to granularity(). Throws Error(Unsupported) without VMM.
  void* reserve(std::size_t bytes, std::size_t align) override;
  /// cuMemAddressFree of a reservation made by reserve() (same `bytes`); nothing may still be
  /// mapped inside it.
  void release(void* va, std::size_t bytes) override;
  /// cuMemCreate (pinned device memory, POSIX-fd exportable, GPUDirect-RDMA capable where the
  /// driver supports it) + cuMemExportToShareableHandle; the memory is zero-filled. `bytes` must
  /// be a positive multiple of granularity(). Throws Error(Unsupported), naming GNIO_MEM_MAP, when
  /// the driver refuses fd-exportable memory (some containers), so the caller can fall back to
  /// legacy CUDA IPC.
  ShareableChunk create_chunk(std::size_t bytes) override;
  /// cuMemMap + cuMemSetAccess(read/write for this GPU) at `at`, which must lie in a reservation
  /// of this backend and not overlap another mapping. For `own` with the fd create_chunk()
  /// returned, the local handle is mapped; any other fd (a peer's chunk, or a dup of an own one)
  /// is imported with cuMemImportFromShareableHandle. `fd` stays the caller's: it may be closed
  /// as soon as this returns. Host code reaches the mapped memory only through copy()/fill():
  /// device memory is not CPU load/store accessible. Throws Error(Unsupported) when the driver
  /// refuses the import (fd sharing not permitted), Error(SystemError) when this GPU cannot
  /// reach the peer's (no peer-to-peer path).
  void map_chunk(void* at, std::size_t bytes, int fd, bool own) override;
  /// cuMemUnmap of a mapping made by map_chunk (same `at` and `bytes`), releasing the imported
  /// handle of a peer chunk.
  void unmap_chunk(void* at, std::size_t bytes) override;
  /// cuMemRelease of the local handle and close() of the fd. Peers that imported the chunk keep
  /// the physical memory alive until they unmap it.
  void close_chunk(ShareableChunk& chunk) override;

  /// True when create_chunk()/map_chunk() can work: the driver offers CUDA VMM with POSIX-fd
  /// handles on this GPU. A driver may still refuse the export at create_chunk() time.
  bool vmm_supported() const noexcept { return vmm_supported_; }
  /// Why vmm_supported() is false (empty when it is true).
  const std::string& vmm_unsupported_reason() const noexcept { return vmm_unsupported_reason_; }
  /// vmm_supported(), with vmm_unsupported_reason() in `why`.
  bool chunks_shareable(std::string* why) const override;

  // ---- legacy CUDA IPC (fallback when VMM fd export is refused) ---------------------------
  /// cudaMalloc of `bytes` (> 0), zero-filled, and its IPC handle. The memory sits at an address
  /// the driver chooses: peers' opened copies are not at `base + peer * stride`.
  IpcAllocation ipc_alloc(std::size_t bytes) override;
  /// cudaIpcOpenMemHandle of a peer's handle (peer access enabled lazily). A process cannot open
  /// its own handles. Returns the peer memory's address in this process.
  void* ipc_open(const IpcHandle& handle) override;
  /// cudaIpcCloseMemHandle of an address ipc_open() returned. Failures are logged.
  void ipc_close(void* peer_ptr) noexcept override;
  /// cudaFree of an ipc_alloc() allocation, after every peer has closed it. Failures are logged.
  void ipc_free(void* ptr) noexcept override;

  // ---- user buffers (Comm::register_buffer) ------------------------------------------------
  /// Device memory of this GPU from cudaMalloc (exported as a legacy CUDA IPC handle of the
  /// allocation, found with cuMemGetAddressRange) or from cuMemCreate with POSIX-fd export allowed
  /// (cuMemRetainAllocationHandle + cuMemExportToShareableHandle of the mapping the range lies
  /// in). Host, managed, stream-ordered-pool (cudaMallocAsync) memory, another GPU's memory and
  /// ranges crossing allocations throw Error(InvalidArgument).
  ExportedBuffer export_buffer(const void* ptr, std::size_t bytes) override;
  /// Closes the fd of a VMM export.
  void release_export(ExportedBuffer& e) noexcept override;
  /// CudaIpc: ipc_open() of the handle (the driver picks the address). CudaVmm: import of the
  /// fd, mapped read/write for this GPU into a reservation of its own.
  ImportedBuffer import_buffer(const BufferExport& desc, int fd) override;
  void release_import(ImportedBuffer& b) noexcept override;

  // ---- host memory mapped into the GPU ----------------------------------------------------
  /// cudaHostAlloc(Mapped | Portable), zero-filled; the same pointer is valid in kernels. Throws
  /// Error(InvalidArgument) for `bytes` == 0.
  void* alloc_host_mapped(std::size_t bytes) override;
  void free_host_mapped(void* p) noexcept override;
  void register_host(void* p, std::size_t bytes) override;
  void unregister_host(void* p) noexcept override;

  // ---- device memory private to this rank ---------------------------------------------------
  /// cudaMalloc; contents undefined. Throws Error(InvalidArgument) for `bytes` == 0.
  void* alloc_device(std::size_t bytes) override;
  void free_device(void* p) noexcept override;

  // ---- streams -------------------------------------------------------------------------------
  /// A cudaStreamNonBlocking stream in `*cuda`; `*host` (if given) is set to nullptr.
  void create_stream(CUstream_st** cuda, detail::HostStream** host) override;
  void destroy_stream(CUstream_st* cuda, detail::HostStream* host) noexcept override;
  /// The StreamRef functions below throw Error(InvalidArgument) for a host-backend stream.
  bool stream_idle(StreamRef s) override;
  bool stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) override;
  void stream_synchronize(StreamRef s) override;
  /// cudaMemcpyAsync(cudaMemcpyDefault): any mix of host, device and peer-mapped addresses.
  void copy(void* dst, const void* src, std::size_t n, StreamRef s) override;
  /// cudaMemsetAsync.
  void fill(void* dst, int value, std::size_t n, StreamRef s) override;
  /// A one-thread kernel on `s` (cuda_stream_ops.cu): the GPU's own system-scope atomic, so it
  /// is atomic against kernels updating the word (the host cannot address device memory, and
  /// copies are not atomic).
  void word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                   std::uint64_t expected, std::uint64_t* old, StreamRef s) override;
  /// One kernel (cuda_stream_ops.cu) that copies the data out of host memory, applies the signal
  /// and stores the mark; data over kDeliverKernelBytes goes through cudaMemcpyAsync first.
  void deliver(const Delivery& d, StreamRef s) override;
  void deliver_batch(const Delivery* d, std::size_t count, StreamRef s) override;
  void start_delivery_agent(DeliveryRing* ring, AgentScratch* scratch, StreamRef s) override;
  void device_synchronize() override;

 private:
  struct Mapping {
    std::size_t bytes;
    std::uint64_t handle;  // CUmemGenericAllocationHandle
    bool imported;         // handle came from an import: this mapping owns (releases) it
  };

  void require_vmm(const char* what) const;
  void require_in_reservation(const void* at, std::size_t bytes, const char* what) const;
  void zero_chunk(std::uint64_t handle, std::size_t bytes);

  int device_ = -1;
  int cu_device_ = -1;  // CUdevice of device_ (the same number today; kept explicit)
  CUstream_st* internal_stream_ = nullptr;  // non-blocking; zero-fills new memory
  std::string description_;
  std::size_t granularity_ = 0;
  bool gdr_capable_vmm_ = false;
  bool vmm_supported_ = false;
  std::string vmm_unsupported_reason_;

  mutable std::mutex mutex_;                               // guards the maps below
  std::map<std::uintptr_t, std::size_t> reservations_;     // base -> bytes (rounded)
  std::map<int, std::uint64_t> own_chunks_;                // exported fd -> local handle
  std::map<std::uintptr_t, Mapping> mappings_;             // mapped address -> mapping
  std::map<std::uintptr_t, std::size_t> ipc_allocations_;  // ipc_alloc'd address -> bytes
  std::map<std::uintptr_t, int> ipc_opened_;               // ipc_open'ed address -> open count
  struct UserImport {
    std::size_t mapped;    // bytes mapped at the reservation's start
    std::size_t reserved;  // bytes of the reservation
    std::uint64_t handle;  // imported CUmemGenericAllocationHandle
  };
  std::map<std::uintptr_t, UserImport> user_imports_;  // peers' VMM buffers by reservation
};

}  // namespace gnio::platform
