// The symmetric heap of one communicator: a collective allocator whose allocations have the same
// offset on every rank, backed by chunks of physical memory that the ranks of a node map into
// one flat region (peer i's heap at base + i*stride), so the device computes a peer address with
// one multiply-add.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "platform/backend.hpp"

namespace gnio {

class FdExchange;

/// Sizes of a heap, from GNIO_HEAP_SIZE / GNIO_HEAP_CHUNK / GNIO_HEAP_MAX.
struct HeapConfig {
  std::size_t initial = 0;  ///< mapped at creation
  std::size_t chunk = 0;    ///< growth granule
  std::size_t max = 0;      ///< virtual address space per rank (stride)
};

class SymmetricHeap {
 public:
  /// Collective over all ranks: reserves the flat region and maps the initial chunk of every
  /// node peer. `node_ranks` lists the world ranks of this node ascending; `local_index` is this
  /// rank's position in it.
  SymmetricHeap(platform::Backend& backend, Bootstrap& bootstrap, FdExchange& fds,
                const std::vector<int>& node_ranks, int local_index, const HeapConfig& config);
  /// Unmaps everything. The caller (Comm) makes sure no peer still writes.
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  /// Collective allocation; every rank passes the same size and alignment (checked first, so a
  /// mismatch throws InvalidArgument on every rank with no effect). Grows the heap when needed.
  std::uint64_t allocate(std::size_t bytes, std::size_t align);
  /// Collective free of an offset returned by allocate(). Throws InvalidArgument (no effect) for
  /// an unknown offset or a double free, on every rank.
  void free(std::uint64_t offset);
  /// Size of the live allocation at `offset`, or 0 if none starts there.
  std::size_t allocation_size(std::uint64_t offset) const;

  char* base() const noexcept { return base_; }
  std::uint64_t stride() const noexcept { return stride_; }
  char* local_base() const noexcept { return base_ + static_cast<std::uint64_t>(local_index_) * stride_; }
  /// Bytes mapped per rank.
  std::size_t mapped() const noexcept { return mapped_; }
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t reserved_va() const noexcept { return reserved_; }
  int local_size() const noexcept { return static_cast<int>(node_ranks_.size()); }

 private:
  void grow(std::size_t at_least);
  std::uint64_t first_fit(std::size_t bytes, std::size_t align) const;

  platform::Backend& backend_;
  Bootstrap& bootstrap_;
  FdExchange& fds_;
  std::vector<int> node_ranks_;
  int local_index_;
  HeapConfig config_;
  char* base_ = nullptr;
  std::uint64_t stride_ = 0;
  std::size_t reserved_ = 0;
  std::size_t mapped_ = 0;
  std::size_t in_use_ = 0;
  struct Chunk {
    std::uint64_t offset;
    platform::ShareableChunk local;  // this rank's memory
  };
  std::vector<Chunk> chunks_;
  std::map<std::uint64_t, std::size_t> live_;  // offset -> size
};

}  // namespace gnio
