#include "memory/symmetric_heap.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "base/enum_names.hpp"
#include "base/fail.hpp"
#include "bootstrap/agree_step.hpp"
#include "bootstrap/fd_exchange.hpp"
#include "gnio/log.hpp"

namespace gnio {
namespace {

std::size_t round_up(std::size_t v, std::size_t to) {
  return (v + to - 1) / to * to;
}

struct AllocRequest {
  std::uint64_t bytes;
  std::uint64_t align;
  std::uint64_t kind;    // 1 = allocate, 2 = free
  std::uint64_t limit;   // most bytes this rank's layout can map
  std::uint64_t mapped;  // bytes this rank has mapped
};

// ------------------------------------------------------------------------------------------------
// The flat layout: node peer i's heap at base + i*stride in one reservation, grown by chunks that
// every node rank maps (host: memfd; cuda: VMM allocations exported as POSIX fds).

class FlatLayout final : public HeapLayout {
 public:
  FlatLayout(platform::Backend& backend, Bootstrap& bootstrap, FdExchange& fds,
             const std::vector<int>& node_ranks, int local_index, const HeapConfig& config)
      : backend_(backend),
        bootstrap_(bootstrap),
        fds_(fds),
        local_size_(node_ranks.size()),
        local_index_(local_index),
        chunk_(config.chunk) {
    const std::size_t gran = backend_.granularity();
    stride_ = round_up(std::max(config.max, config.initial), gran);
    // A stride aligned to 2 MiB keeps large pages usable on both backends.
    stride_ = round_up(stride_, std::size_t{2} << 20);
    reserved_ = stride_ * local_size_;
    std::exception_ptr err;
    try {
      base_ = static_cast<char*>(backend_.reserve(reserved_, std::size_t{2} << 20));
    } catch (...) {
      err = std::current_exception();
    }
    agree_step(bootstrap_, err, "reserving the symmetric heap's address space", [&] {
      if (base_) backend_.release(base_, reserved_);
      base_ = nullptr;
    });
    GNIO_INFO(Memory,
              "symmetric heap (%s): reserved %zu GiB of address space for %zu node ranks at %p",
              to_string(mapping()), reserved_ >> 30, local_size_, static_cast<void*>(base_));
  }

  ~FlatLayout() override { teardown(false); }

  HeapMapping mapping() const noexcept override {
    return backend_.kind() == platform::BackendKind::Host ? HeapMapping::Memfd : HeapMapping::Vmm;
  }
  std::size_t mapped() const noexcept override { return mapped_; }
  std::size_t limit() const noexcept override { return stride_; }
  std::size_t reserved_va() const noexcept override { return reserved_; }
  char* peer_base(int local_index) const noexcept override {
    return base_ + static_cast<std::uint64_t>(local_index) * stride_;
  }
  char* base() const noexcept override { return base_; }
  std::uint64_t stride() const noexcept override { return stride_; }

  void grow(std::size_t at_least) override {
    const std::size_t gran = backend_.granularity();
    const std::size_t bytes = round_up(std::max(at_least, chunk_), gran);
    // SymmetricHeap::allocate checked every rank's limit; this holds unless chunk rounding
    // overshoots, which the check below turns into the same error on every rank.
    std::exception_ptr err;
    if (mapped_ + bytes > stride_) {
      try {
        fail(ErrorClass::InvalidArgument,
             "symmetric heap exhausted: %zu bytes mapped, %zu more needed, limit %llu "
             "(GNIO_HEAP_MAX); raise GNIO_HEAP_MAX or free memory",
             mapped_, bytes, static_cast<unsigned long long>(stride_));
      } catch (...) {
        err = std::current_exception();
      }
    }
    platform::ShareableChunk local;
    if (!err) {
      try {
        local = backend_.create_chunk(bytes);
      } catch (...) {
        err = std::current_exception();
      }
    }
    agree_step(bootstrap_, err, "creating symmetric-heap memory", [&] {
      try {
        if (local.fd >= 0 || local.handle) backend_.close_chunk(local);
      } catch (const std::exception& e) {
        GNIO_WARN(Memory, "undoing a failed heap growth: %s", e.what());
      }
    });
    const std::uint64_t offset = mapped_;
    std::vector<int> peer_fds;
    try {
      peer_fds = fds_.allgather_fd(local.fd);
    } catch (...) {
      backend_.close_chunk(local);
      throw;
    }
    std::size_t mapped_peers = 0;
    try {
      for (std::size_t i = 0; i < local_size_; ++i, ++mapped_peers)
        backend_.map_chunk(base_ + i * stride_ + offset, bytes, peer_fds[i],
                           static_cast<int>(i) == local_index_);
    } catch (...) {
      err = std::current_exception();
    }
    for (int fd : peer_fds) ::close(fd);
    agree_step(bootstrap_, err, "mapping node peers' symmetric-heap memory", [&] {
      for (std::size_t i = 0; i < mapped_peers; ++i) {
        try {
          backend_.unmap_chunk(base_ + i * stride_ + offset, bytes);
        } catch (const std::exception& e) {
          GNIO_WARN(Memory, "undoing a failed heap growth: %s", e.what());
        }
      }
      try {
        backend_.close_chunk(local);
      } catch (const std::exception& e) {
        GNIO_WARN(Memory, "undoing a failed heap growth: %s", e.what());
      }
    });
    chunks_.push_back(Chunk{offset, local});
    mapped_ += bytes;
    GNIO_INFO(Memory, "symmetric heap grew by %zu MiB to %zu MiB per rank", bytes >> 20,
              mapped_ >> 20);
  }

  void teardown(bool /*peers_alive*/) noexcept override {
    // Mappings hold their own references (memfd pages, imported VMM handles): the order between
    // ranks does not matter once Comm made sure nobody still writes.
    for (Chunk& c : chunks_) {
      for (std::size_t i = 0; i < local_size_; ++i) {
        try {
          backend_.unmap_chunk(base_ + i * stride_ + c.offset, c.local.bytes);
        } catch (const std::exception& e) {
          GNIO_WARN(Memory, "symmetric heap teardown: %s", e.what());
        }
      }
      try {
        backend_.close_chunk(c.local);
      } catch (const std::exception& e) {
        GNIO_WARN(Memory, "symmetric heap teardown: %s", e.what());
      }
    }
    chunks_.clear();
    mapped_ = 0;
    if (base_) {
      try {
        backend_.release(base_, reserved_);
      } catch (const std::exception& e) {
        GNIO_WARN(Memory, "symmetric heap teardown: %s", e.what());
      }
      base_ = nullptr;
    }
  }

 private:
  struct Chunk {
    std::uint64_t offset;
    platform::ShareableChunk local;  // this rank's memory
  };

  platform::Backend& backend_;
  Bootstrap& bootstrap_;
  FdExchange& fds_;
  std::size_t local_size_;
  int local_index_;
  std::size_t chunk_;
  char* base_ = nullptr;
  std::uint64_t stride_ = 0;
  std::size_t reserved_ = 0;
  std::size_t mapped_ = 0;
  std::vector<Chunk> chunks_;
};

// ------------------------------------------------------------------------------------------------
// Choosing the layout. Every rank of the communicator uses the same one (a rank's collectives
// must match its peers'), decided from what every rank asked for and can do.

enum Request : std::int32_t { kBadRequest = -1, kAuto = 0, kVmm = 1, kIpc = 2 };

struct ModeCard {
  std::int32_t cuda;         // 1 = cuda backend
  std::int32_t request;      // Request
  std::int32_t vmm_capable;  // cuda: the backend offers VMM with POSIX fds
  std::int32_t pad;
  std::uint64_t initial;  // GNIO_HEAP_SIZE
  char reason[112];       // why VMM is unavailable / the bad GNIO_MEM_MAP text
};

Request parse_request(const std::string& s) {
  if (s == "auto") return kAuto;
  if (s == "vmm") return kVmm;
  if (s == "ipc") return kIpc;
  return kBadRequest;
}

const char* request_name(std::int32_t r) {
  switch (r) {
    case kAuto: return "auto";
    case kVmm: return "vmm";
    case kIpc: return "ipc";
    default: return "?";
  }
}

}  // namespace

const char* to_string(HeapMapping m) noexcept {
  return enum_name(m, {"memfd", "vmm", "ipc"});
}

// ---- the heap ---------------------------------------------------------------------------------

SymmetricHeap::SymmetricHeap(platform::Backend& backend, Bootstrap& bootstrap, FdExchange& fds,
                             const std::vector<int>& node_ranks, int local_index,
                             const HeapConfig& config)
    : bootstrap_(bootstrap), node_ranks_(node_ranks), local_index_(local_index) {
  const int rank = bootstrap_.rank();
  const int size = bootstrap_.size();

  // 1. What every rank asks for and can do.
  std::vector<ModeCard> cards(size);
  ModeCard& mine = cards[rank];
  std::memset(&mine, 0, sizeof(mine));
  mine.cuda = backend.kind() == platform::BackendKind::Cuda;
  mine.request = parse_request(config.mem_map);
  mine.initial = config.initial;
  if (mine.request == kBadRequest)
    std::strncpy(mine.reason, config.mem_map.c_str(), sizeof(mine.reason) - 1);
  if (mine.cuda) {
    std::string why;
    mine.vmm_capable = backend.chunks_shareable(&why);
    if (!mine.vmm_capable) std::strncpy(mine.reason, why.c_str(), sizeof(mine.reason) - 1);
  }
  bootstrap_.allgather(cards.data(), sizeof(ModeCard));

  // 2. One decision, the same on every rank (so errors are thrown by every rank together).
  for (int r = 0; r < size; ++r)
    if (cards[r].request == kBadRequest)
      fail(ErrorClass::InvalidArgument,
           "rank %d: GNIO_MEM_MAP='%s' on rank %d is not one of auto, vmm, ipc; unset it or fix it",
           rank, cards[r].reason, r);
  std::vector<int> differ;
  for (int r = 0; r < size; ++r)
    if (cards[r].request != cards[0].request) differ.push_back(r);
  if (!differ.empty())
    fail(ErrorClass::InvalidArgument,
         "rank %d: GNIO_MEM_MAP must be the same on every rank: rank 0 has %s, ranks %s differ",
         rank, request_name(cards[0].request), list_ranks(differ).c_str());
  const Request request = static_cast<Request>(cards[0].request);
  std::vector<int> cuda_ranks, host_ranks, no_vmm;
  for (int r = 0; r < size; ++r) {
    (cards[r].cuda ? cuda_ranks : host_ranks).push_back(r);
    if (cards[r].cuda && !cards[r].vmm_capable) no_vmm.push_back(r);
  }
  bool ipc = false;
  if (cuda_ranks.empty()) {
    if (request == kIpc && rank == 0)
      GNIO_INFO(
          Memory,
          "GNIO_MEM_MAP=ipc ignored: the host backend always shares its heap as memfd chunks");
  } else if (request == kVmm && !no_vmm.empty()) {
    fail(ErrorClass::Unsupported,
         "rank %d: GNIO_MEM_MAP=vmm, but rank %d cannot share CUDA VMM memory: %s; use "
         "GNIO_MEM_MAP=auto or ipc",
         rank, no_vmm[0], cards[no_vmm[0]].reason);
  } else if (request == kIpc || (request == kAuto && !no_vmm.empty())) {
    ipc = true;
    if (request == kAuto && rank == 0)
      GNIO_INFO(Memory, "rank %d cannot share CUDA VMM memory (%s): using the CUDA IPC heap",
                no_vmm[0], cards[no_vmm[0]].reason);
  }

  // 3. Flat first (unless IPC was chosen); a driver refusing fd-shared VMM memory only when it is
  // created, exported or imported sends GNIO_MEM_MAP=auto to IPC, on every rank together.
  if (!ipc) {
    try {
      layout_ =
          std::make_unique<FlatLayout>(backend, bootstrap_, fds, node_ranks_, local_index_, config);
      if (config.initial) layout_->grow(config.initial);
    } catch (const Error& e) {
      layout_.reset();
      if (request != kAuto || cuda_ranks.empty() || e.error_class() != ErrorClass::Unsupported)
        throw;
      GNIO_INFO(Memory, "CUDA VMM heap refused (%s); falling back to the CUDA IPC heap",
                e.message().c_str());
      ipc = true;
    }
  }
  if (ipc) {
    if (!host_ranks.empty())
      fail(ErrorClass::Unsupported,
           "rank %d: the CUDA IPC heap (GNIO_MEM_MAP=%s) needs every rank on the cuda backend, but "
           "ranks %s use the host backend; run every rank with the same GNIO_BACKEND",
           rank, request_name(request), list_ranks(host_ranks).c_str());
    for (int r = 0; r < size; ++r)
      if (cards[r].initial != cards[0].initial || cards[r].initial == 0)
        fail(ErrorClass::InvalidArgument,
             "rank %d: the CUDA IPC heap is fixed at GNIO_HEAP_SIZE, which must be positive and "
             "the same on every rank (rank 0: %llu bytes, rank %d: %llu bytes)",
             rank, static_cast<unsigned long long>(cards[0].initial), r,
             static_cast<unsigned long long>(cards[r].initial));
    layout_ = make_ipc_layout(backend, bootstrap_, node_ranks_, local_index_, config.initial);
  }
}

SymmetricHeap::~SymmetricHeap() {
  teardown(false);
}

void SymmetricHeap::teardown(bool peers_alive) noexcept {
  if (torn_down_ || !layout_) return;
  torn_down_ = true;
  layout_->teardown(peers_alive);
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
  GNIO_REQUIRE(align && (align & (align - 1)) == 0, "alloc: alignment %zu is not a power of two",
               align);
  GNIO_REQUIRE(!torn_down_, "alloc: the symmetric heap was torn down");
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  // Check that every rank asks for the same thing, and can map it, before anything changes.
  std::vector<AllocRequest> all(bootstrap_.size());
  all[bootstrap_.rank()] = {size, align, 1, layout_->limit(), layout_->mapped()};
  bootstrap_.allgather(all.data(), sizeof(AllocRequest));
  std::string mismatched;
  std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t least_mapped = limit;
  for (int r = 0; r < bootstrap_.size(); ++r) {
    if (all[r].bytes != all[0].bytes || all[r].align != all[0].align || all[r].kind != 1)
      mismatched += (mismatched.empty() ? "" : ", ") + std::to_string(r);
    limit = std::min(limit, all[r].limit);
    least_mapped = std::min(least_mapped, all[r].mapped);
  }
  if (!mismatched.empty())
    fail(ErrorClass::InvalidArgument,
         "alloc is collective and needs the same size on every rank: rank 0 asked for %llu bytes, "
         "ranks %s asked for something else (or called free); nothing was allocated",
         static_cast<unsigned long long>(all[0].bytes), mismatched.c_str());
  const std::uint64_t off = size <= limit ? first_fit(size, align) : limit;
  if (size > limit || off > limit - size) {
    if (mapping() == HeapMapping::Ipc)
      fail(
          ErrorClass::InvalidArgument,
          "alloc of %zu bytes: the symmetric heap is fixed at %llu bytes per rank in CUDA IPC mode "
          "(%zu in use) and cannot grow; raise GNIO_HEAP_SIZE, or use GNIO_MEM_MAP=vmm where the "
          "driver allows it; nothing was allocated",
          bytes, static_cast<unsigned long long>(limit), in_use_);
    fail(ErrorClass::InvalidArgument,
         "alloc of %zu bytes: symmetric heap exhausted (%zu bytes in use, limit %llu bytes per "
         "rank, GNIO_HEAP_MAX); raise GNIO_HEAP_MAX or free memory; nothing was allocated",
         bytes, in_use_, static_cast<unsigned long long>(limit));
  }
  // Every rank grows when any rank must (growth is collective).
  if (off + size > least_mapped) {
    const std::size_t have = layout_->mapped();
    layout_->grow(off + size > have ? off + size - have : 1);
  }
  live_[off] = size;
  in_use_ += size;
  return off;
}

void SymmetricHeap::free(std::uint64_t offset) {
  auto it = live_.find(offset);
  std::vector<AllocRequest> all(bootstrap_.size());
  all[bootstrap_.rank()] = {offset, it == live_.end() ? 0u : 1u, 2, 0, 0};
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
