#include "memory/symmetric_heap.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "base/fail.hpp"
#include "bootstrap/fd_exchange.hpp"
#include "gnio/log.hpp"

namespace gnio {
namespace {

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

struct AllocRequest {
  std::uint64_t bytes;
  std::uint64_t align;
  std::uint64_t kind;  // 1 = allocate, 2 = free
};

}  // namespace

SymmetricHeap::SymmetricHeap(platform::Backend& backend, Bootstrap& bootstrap, FdExchange& fds,
                             const std::vector<int>& node_ranks, int local_index,
                             const HeapConfig& config)
    : backend_(backend),
      bootstrap_(bootstrap),
      fds_(fds),
      node_ranks_(node_ranks),
      local_index_(local_index),
      config_(config) {
  const std::size_t gran = backend_.granularity();
  stride_ = round_up(std::max(config_.max, config_.initial), gran);
  // A stride aligned to 2 MiB keeps large pages usable on both backends.
  stride_ = round_up(stride_, std::size_t{2} << 20);
  reserved_ = stride_ * node_ranks_.size();
  base_ = static_cast<char*>(backend_.reserve(reserved_, std::size_t{2} << 20));
  GNIO_INFO(Memory, "symmetric heap: reserved %zu GiB of address space for %zu node ranks at %p",
            reserved_ >> 30, node_ranks_.size(), static_cast<void*>(base_));
  try {
    if (config_.initial) grow(config_.initial);
  } catch (...) {
    backend_.release(base_, reserved_);
    throw;
  }
}

SymmetricHeap::~SymmetricHeap() {
  for (Chunk& c : chunks_) {
    for (std::size_t i = 0; i < node_ranks_.size(); ++i)
      backend_.unmap_chunk(base_ + i * stride_ + c.offset, c.local.bytes);
    backend_.close_chunk(c.local);
  }
  if (base_) backend_.release(base_, reserved_);
}

void SymmetricHeap::grow(std::size_t at_least) {
  const std::size_t gran = backend_.granularity();
  const std::size_t bytes = round_up(std::max(at_least, config_.chunk), gran);
  if (mapped_ + bytes > stride_)
    fail(ErrorClass::InvalidArgument,
         "symmetric heap exhausted: %zu bytes mapped, %zu more needed, limit %llu "
         "(GNIO_HEAP_MAX); raise GNIO_HEAP_MAX or free memory",
         mapped_, bytes, static_cast<unsigned long long>(stride_));
  Chunk chunk{mapped_, backend_.create_chunk(bytes)};
  std::vector<int> peer_fds;
  try {
    peer_fds = fds_.allgather_fd(chunk.local.fd);
  } catch (...) {
    backend_.close_chunk(chunk.local);
    throw;
  }
  std::size_t mapped_peers = 0;
  try {
    for (std::size_t i = 0; i < node_ranks_.size(); ++i, ++mapped_peers)
      backend_.map_chunk(base_ + i * stride_ + chunk.offset, bytes, peer_fds[i],
                         static_cast<int>(i) == local_index_);
  } catch (...) {
    for (std::size_t i = 0; i < mapped_peers; ++i)
      backend_.unmap_chunk(base_ + i * stride_ + chunk.offset, bytes);
    for (int fd : peer_fds) ::close(fd);
    backend_.close_chunk(chunk.local);
    throw;
  }
  for (int fd : peer_fds) ::close(fd);
  chunks_.push_back(chunk);
  mapped_ += bytes;
  GNIO_INFO(Memory, "symmetric heap grew by %zu MiB to %zu MiB per rank", bytes >> 20, mapped_ >> 20);
}

std::uint64_t SymmetricHeap::first_fit(std::size_t bytes, std::size_t align) const {
  std::uint64_t cursor = 0;
  for (const auto& [off, size] : live_) {
    std::uint64_t start = round_up(cursor, align);
    if (start + bytes <= off) return start;
    cursor = off + size;
  }
  return round_up(cursor, align);
}

std::uint64_t SymmetricHeap::allocate(std::size_t bytes, std::size_t align) {
  GNIO_REQUIRE(align && (align & (align - 1)) == 0, "alloc: alignment %zu is not a power of two", align);
  GNIO_REQUIRE(bytes <= stride_, "alloc: %zu bytes exceed the heap limit of %llu bytes per rank (GNIO_HEAP_MAX)",
               bytes, static_cast<unsigned long long>(stride_));
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  // Check that every rank asks for the same thing before anything changes anywhere.
  std::vector<AllocRequest> all(bootstrap_.size());
  all[bootstrap_.rank()] = {size, align, 1};
  bootstrap_.allgather(all.data(), sizeof(AllocRequest));
  std::string mismatched;
  for (int r = 0; r < bootstrap_.size(); ++r)
    if (all[r].bytes != all[0].bytes || all[r].align != all[0].align || all[r].kind != 1)
      mismatched += (mismatched.empty() ? "" : ", ") + std::to_string(r);
  if (!mismatched.empty())
    fail(ErrorClass::InvalidArgument,
         "alloc is collective and needs the same size on every rank: rank 0 asked for %llu bytes, "
         "ranks %s asked for something else (or called free); nothing was allocated",
         static_cast<unsigned long long>(all[0].bytes), mismatched.c_str());
  std::uint64_t off = first_fit(size, align);
  if (off + size > mapped_) grow(off + size - mapped_);
  live_[off] = size;
  in_use_ += size;
  return off;
}

void SymmetricHeap::free(std::uint64_t offset) {
  auto it = live_.find(offset);
  std::vector<AllocRequest> all(bootstrap_.size());
  all[bootstrap_.rank()] = {offset, it == live_.end() ? 0u : 1u, 2};
  bootstrap_.allgather(all.data(), sizeof(AllocRequest));
  std::string mismatched;
  for (int r = 0; r < bootstrap_.size(); ++r)
    if (all[r].bytes != all[0].bytes || all[r].align != all[0].align || all[r].kind != 2)
      mismatched += (mismatched.empty() ? "" : ", ") + std::to_string(r);
  if (!mismatched.empty())
    fail(ErrorClass::InvalidArgument,
         "free is collective and needs the same pointer on every rank: ranks %s differ from rank "
         "0 (offset %llu); nothing was freed",
         mismatched.c_str(), static_cast<unsigned long long>(all[0].bytes));
  if (it == live_.end())
    fail(ErrorClass::InvalidArgument,
         "free: offset %llu is not a live symmetric allocation (double free or not from alloc); "
         "nothing was freed",
         static_cast<unsigned long long>(offset));
  in_use_ -= it->second;
  live_.erase(it);
}

std::size_t SymmetricHeap::allocation_size(std::uint64_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second;
}

}  // namespace gnio
