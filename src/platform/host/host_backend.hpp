// The host platform backend: "device memory" is shared memory (memfd) that the node's ranks map,
// "kernels" run on CPU threads, "streams" are ordered task queues (DESIGN.md §2.1). It lets
// bootstrap, symmetric memory, transports and collectives run, and be tested under sanitizers,
// on machines without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "platform/backend.hpp"

namespace gnio::platform {

/// The host backend. Thread-safe. Memory it hands out (device and host-mapped) is process-wide,
/// shared by every HostBackend instance of the process; reservations and streams belong to the
/// instance that made them.
class HostBackend final : public Backend {
 public:
  HostBackend();
  /// Destroys (after draining) any stream still alive; releases nothing else, since memory may
  /// still be mapped by peers.
  ~HostBackend() override;

  BackendKind kind() const noexcept override { return BackendKind::Host; }
  int device() const noexcept override { return -1; }
  /// "host CPU backend, N cores" (the CPUs this process may run on).
  std::string describe() const override;

  /// The page size: chunks and mappings are plain mmap()s of a memfd, so anything coarser would
  /// only waste memory (huge pages would not help: the host backend is for correctness, not
  /// bandwidth, and memfd THP depends on a system-wide shmem setting).
  std::size_t granularity() const override;
  /// A PROT_NONE, MAP_NORESERVE anonymous mapping: address space only.
  void* reserve(std::size_t bytes, std::size_t align) override;
  void release(void* va, std::size_t bytes) override;
  /// A memfd (close-on-exec) of `bytes`; its fd can be sent to node peers with SCM_RIGHTS.
  ShareableChunk create_chunk(std::size_t bytes) override;
  /// MAP_SHARED | MAP_FIXED of the fd at `at`, which must lie inside a reservation of this
  /// backend. Works for the fd of a chunk created by another process.
  void map_chunk(void* at, std::size_t bytes, int fd, bool own) override;
  /// Puts PROT_NONE anonymous memory back over the range: the chunk's memory stays with its fd
  /// (and other mappers), the reservation stays intact.
  void unmap_chunk(void* at, std::size_t bytes) override;
  void close_chunk(ShareableChunk& chunk) override;
  /// Always: memfds are shared with SCM_RIGHTS.
  bool chunks_shareable(std::string* why) const override;

  /// Throw Error(Unsupported): the host backend's heap is always memfd chunks.
  IpcAllocation ipc_alloc(std::size_t bytes) override;
  void* ipc_open(const IpcHandle& handle) override;
  /// Nothing was opened or allocated: log and ignore.
  void ipc_close(void* peer_ptr) noexcept override;
  void ipc_free(void* ptr) noexcept override;

  /// Only alloc_device() memory (the process's memfd arena): the export names the arena's fd and
  /// the file offsets of the pages covering the range (host_backend_find_shareable()).
  ExportedBuffer export_buffer(const void* ptr, std::size_t bytes) override;
  /// Nothing to release: the arena owns its fd.
  void release_export(ExportedBuffer& e) noexcept override;
  /// mmap(MAP_SHARED) of the covering pages of the peer's arena fd, anywhere in this process.
  ImportedBuffer import_buffer(const BufferExport& desc, int fd) override;
  /// munmap of what import_buffer() mapped.
  void release_import(ImportedBuffer& b) noexcept override;

  void* alloc_host_mapped(std::size_t bytes) override;
  void free_host_mapped(void* p) noexcept override;
  void register_host(void* p, std::size_t bytes) override;
  void unregister_host(void* p) noexcept override;

  /// From the process's memfd arena, so host_backend_find_shareable() can share it with peers.
  void* alloc_device(std::size_t bytes) override;
  void free_device(void* p) noexcept override;

  void create_stream(CUstream_st** cuda, detail::HostStream** host) override;
  void destroy_stream(CUstream_st* cuda, detail::HostStream* host) noexcept override;
  bool stream_idle(StreamRef s) override;
  bool stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) override;
  void stream_synchronize(StreamRef s) override;
  /// memmove on the stream's worker, in stream order.
  void copy(void* dst, const void* src, std::size_t n, StreamRef s) override;
  /// memset on the stream's worker, in stream order.
  void fill(void* dst, int value, std::size_t n, StreamRef s) override;
  /// The atomic on the stream's worker, in stream order (release: the copies before it are
  /// seen first).
  void word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                   std::uint64_t expected, std::uint64_t* old, StreamRef s) override;
  /// memcpy, the signal's atomic and the mark's release store on the stream's worker.
  void deliver(const Delivery& d, StreamRef s) override;
  void deliver_batch(const Delivery* d, std::size_t count, StreamRef s) override;
  void start_delivery_agent(DeliveryRing* ring, AgentScratch* scratch, StreamRef s) override;
  /// Synchronizes every live stream of this backend; rethrows the first error found.
  void device_synchronize() override;

 private:
  /// Throws InvalidArgument unless [at, at + bytes) is page-aligned and inside one reservation.
  void check_in_reservation(const char* op, const void* at, std::size_t bytes);
  /// The host stream behind `s`; InvalidArgument for a CUDA stream.
  detail::HostStream* host_stream(StreamRef s, const char* op);

  std::mutex mu_;
  /// Reservations made by reserve(): start address -> bytes.
  std::map<std::uintptr_t, std::size_t> reservations_;
  /// Live streams. Shared ownership so device_synchronize() can wait on a stream outside the lock
  /// while another thread destroys it.
  std::unordered_map<detail::HostStream*, std::shared_ptr<detail::HostStream>> streams_;
};

}  // namespace gnio::platform
