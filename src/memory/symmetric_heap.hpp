// The symmetric heap of one communicator: a collective allocator whose allocations have the same
// offset on every rank, backed by memory that the ranks of a node map into each other's address
// space. How that memory is backed and where a node peer's copy appears is the heap's layout:
//
//  * flat (host backend's memfd chunks, cuda's VMM chunks exported as POSIX fds): one region per
//    node, peer i's heap at base + i*stride, so the device computes a peer address with one
//    multiply-add; grows chunk by chunk up to GNIO_HEAP_MAX;
//  * table (cuda's legacy CUDA IPC, GNIO_MEM_MAP=ipc or the automatic fallback): one cudaMalloc of
//    GNIO_HEAP_SIZE per rank, opened by node peers wherever their driver puts it, so peer bases
//    come from a small device-memory table; fixed size.
//
// Callers see one interface (allocate/free/addresses); the layout is chosen at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/agree_step.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"
#include "platform/backend.hpp"

namespace gnio {

class FdExchange;

/// How node peers map each other's heaps.
enum class HeapMapping {
  Memfd,  ///< host backend: memfd chunks, flat layout
  Vmm,    ///< cuda: VMM chunks shared as POSIX fds, flat layout
  Ipc,    ///< cuda: one legacy-CUDA-IPC allocation per rank, per-peer base table
};

/// "memfd", "vmm" or "ipc".
const char* to_string(HeapMapping m) noexcept;

/// Sizes and mapping of a heap, from GNIO_HEAP_SIZE / GNIO_HEAP_CHUNK / GNIO_HEAP_MAX /
/// GNIO_MEM_MAP.
struct HeapConfig {
  std::size_t initial = 0;       ///< mapped at creation (the whole heap in ipc mode)
  std::size_t chunk = 0;         ///< growth granule
  std::size_t max = 0;           ///< virtual address space per rank (stride)
  std::string mem_map = "auto";  ///< auto, vmm or ipc (cuda backend; the host backend uses memfd)
};

// ---- layouts ----------------------------------------------------------------------------------

/// The memory behind a heap (internal to the memory layer; see the file comment).
class HeapLayout {
 public:
  virtual ~HeapLayout() = default;
  virtual HeapMapping mapping() const noexcept = 0;
  /// Bytes mapped per rank.
  virtual std::size_t mapped() const noexcept = 0;
  /// The most bytes per rank the layout can ever map.
  virtual std::size_t limit() const noexcept = 0;
  /// Virtual address space this process holds for the node's heaps.
  virtual std::size_t reserved_va() const noexcept = 0;
  /// Collective over all ranks: maps at least `at_least` more bytes per rank. A failure on any
  /// rank throws on every rank and changes nothing.
  virtual void grow(std::size_t at_least) = 0;
  /// Node peer `local_index`'s heap as this process addresses it.
  virtual char* peer_base(int local_index) const noexcept = 0;
  /// Flat: node peer 0's base; table: this rank's base.
  virtual char* base() const noexcept = 0;
  /// Flat: distance between node peers' heaps; table: 0.
  virtual std::uint64_t stride() const noexcept = 0;
  /// Table layouts: node-local index -> heap base, in device memory; flat: nullptr.
  virtual const std::uint64_t* peer_base_table() const noexcept { return nullptr; }
  /// Unmaps peers' memory and frees this rank's. `peers_alive`: every rank tears down now too,
  /// so the layout may wait for them (CUDA IPC: owners free only after every peer closed).
  virtual void teardown(bool peers_alive) noexcept = 0;
};

/// The CUDA IPC layout (ipc_heap.cpp). Collective over all ranks.
std::unique_ptr<HeapLayout> make_ipc_layout(platform::Backend& backend, Bootstrap& bootstrap,
                                            const std::vector<int>& node_ranks, int local_index,
                                            std::size_t bytes);

// ---- the heap ---------------------------------------------------------------------------------

class SymmetricHeap {
 public:
  /// Collective over all ranks: chooses the layout (GNIO_MEM_MAP, what the backend supports),
  /// maps the initial memory of every node peer. `node_ranks` lists the world ranks of this node
  /// ascending; `local_index` is this rank's position in it.
  SymmetricHeap(platform::Backend& backend, Bootstrap& bootstrap, FdExchange& fds,
                const std::vector<int>& node_ranks, int local_index, const HeapConfig& config);
  /// teardown(false) unless teardown() already ran.
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  /// Unmaps everything. The caller (Comm) makes sure no peer still writes; `peers_alive` says
  /// every rank is tearing down at the same time (not after an abort).
  void teardown(bool peers_alive) noexcept;

  /// Collective allocation; every rank passes the same size and alignment (checked first, so a
  /// mismatch throws InvalidArgument on every rank with no effect). Grows the heap when needed;
  /// beyond what the layout can map, InvalidArgument on every rank.
  std::uint64_t allocate(std::size_t bytes, std::size_t align);
  /// Collective free of an offset returned by allocate(). Throws InvalidArgument (no effect) for
  /// an unknown offset or a double free, on every rank.
  void free(std::uint64_t offset);
  /// Size of the live allocation at `offset`, or 0 if none starts there.
  std::size_t allocation_size(std::uint64_t offset) const;

  /// How node peers map the heap.
  HeapMapping mapping() const noexcept { return layout_->mapping(); }
  /// Flat: node peer 0's base (peer i at base() + i*stride()); table: this rank's base.
  char* base() const noexcept { return layout_->base(); }
  /// Flat: the stride; table: 0 (so base() + local_index*stride() is this rank's base either way).
  std::uint64_t stride() const noexcept { return layout_->stride(); }
  char* local_base() const noexcept { return layout_->peer_base(local_index_); }
  /// Node peer `local_index`'s heap as this process addresses it.
  char* peer_base(int local_index) const noexcept { return layout_->peer_base(local_index); }
  /// Device-memory table of node peers' bases for table layouts; nullptr for flat ones.
  const std::uint64_t* peer_base_table() const noexcept { return layout_->peer_base_table(); }
  /// Bytes mapped per rank.
  std::size_t mapped() const noexcept { return layout_->mapped(); }
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t reserved_va() const noexcept { return layout_->reserved_va(); }
  int local_size() const noexcept { return static_cast<int>(node_ranks_.size()); }

 private:
  std::uint64_t first_fit(std::size_t bytes, std::size_t align) const;

  Bootstrap& bootstrap_;
  std::vector<int> node_ranks_;
  int local_index_;
  std::unique_ptr<HeapLayout> layout_;
  bool torn_down_ = false;
  std::size_t in_use_ = 0;
  std::map<std::uint64_t, std::size_t> live_;  // offset -> size
};

}  // namespace gnio
