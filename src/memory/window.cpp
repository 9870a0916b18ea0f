// Registered user buffers (see window.hpp and include/gnio/window.hpp).
#include "memory/window.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/fail.hpp"
#include "bootstrap/fd_exchange.hpp"
#include "gnio/log.hpp"
#include "gnio/window.hpp"
#include "memory/symmetric_heap.hpp"

namespace gnio {
namespace detail {
namespace {

/// What every rank tells every other about its buffer once all agreed it can be registered.
struct WindowCard {
  std::uint64_t id;
  std::uint64_t bytes;
  platform::BufferExport desc;
};

/// Ids and device-work state every rank reports when deregistering.
struct DeregisterCard {
  std::uint64_t id;
  std::uint64_t device_ok;
};

bool sends_fd(platform::BufferShareKind k) {
  return k == platform::BufferShareKind::HostMemfd || k == platform::BufferShareKind::CudaVmm;
}

}  // namespace

std::shared_ptr<WindowImpl> register_window(WindowContext ctx, std::uint64_t id, void* ptr,
                                            std::size_t bytes) {
  platform::Backend& backend = *ctx.backend;
  Bootstrap& bootstrap = *ctx.bootstrap;
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  const std::vector<int> node_ranks = ctx.node_ranks;
  const int me = ctx.local_index;
  const int local_size = static_cast<int>(node_ranks.size());

  // 1. Validate and describe this rank's buffer locally, then agree: memory that cannot be
  // registered on any rank is an InvalidArgument on every rank, before anything is mapped.
  platform::ExportedBuffer exported;
  std::exception_ptr err;
  // Memory inside the symmetric heap is mapped by every node peer already: the offset is all a
  // peer needs (no OS handle, no second mapping of the same pages).
  const char* heap_base = ctx.heap ? ctx.heap->local_base() : nullptr;
  const auto* p = static_cast<const char*>(ptr);
  const bool in_heap = heap_base && bytes > 0 && p >= heap_base && bytes <= ctx.heap->mapped() &&
                       static_cast<std::size_t>(p - heap_base) <= ctx.heap->mapped() - bytes;
  try {
    if (in_heap) {
      exported.desc.kind = platform::BufferShareKind::SymmetricHeap;
      exported.desc.ptr_offset = static_cast<std::uint64_t>(p - heap_base);
      exported.desc.map_bytes = bytes;
    } else if (bytes > 0) {
      exported = backend.export_buffer(ptr, bytes);
    }
  } catch (...) {
    err = std::current_exception();
  }
  agree_step(bootstrap, err, "register_buffer", [&] { backend.release_export(exported); });

  // 2. Every rank's size and description.
  std::vector<WindowCard> cards(size);
  std::memset(static_cast<void*>(cards.data()), 0, sizeof(WindowCard) * cards.size());
  cards[rank].id = id;
  cards[rank].bytes = bytes;
  cards[rank].desc = exported.desc;
  try {
    bootstrap.allgather(cards.data(), sizeof(WindowCard));
  } catch (...) {
    backend.release_export(exported);
    throw;
  }
  for (int r = 0; r < size; ++r)
    if (cards[r].id != id) {
      backend.release_export(exported);
      fail(ErrorClass::Internal,
           "rank %d: register_buffer #%llu met rank %d's register_buffer #%llu; please report this",
           rank, static_cast<unsigned long long>(id), r,
           static_cast<unsigned long long>(cards[r].id));
    }

  // 3. File descriptors, when any node rank's memory travels as one (host memfd, CUDA VMM). A rank
  // with nothing to send sends /dev/null so the node's exchange stays in step.
  bool need_fds = false;
  for (int r : node_ranks) need_fds |= sends_fd(cards[r].desc.kind);
  std::vector<int> peer_fds;
  if (need_fds) {
    int placeholder = -1;
    int send_fd = exported.fd;
    try {
      if (send_fd < 0) {
        placeholder = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (placeholder < 0) fail_errno("register_buffer: opening /dev/null for the fd exchange");
        send_fd = placeholder;
      }
      peer_fds = ctx.fds->allgather_fd(send_fd);
    } catch (...) {
      if (placeholder >= 0) ::close(placeholder);
      backend.release_export(exported);
      throw;
    }
    if (placeholder >= 0) ::close(placeholder);
  }
  // Peers hold their own descriptors now (or the memory handle): this rank's export is done.
  backend.release_export(exported);

  // 4. Map the node peers' buffers and build the kernels' table; agree again, so a rank that
  // cannot map (no peer-to-peer path) makes every rank undo and throw.
  auto impl = std::shared_ptr<WindowImpl>(new WindowImpl(std::move(ctx)));
  impl->id_ = id;
  impl->local_ = bytes > 0 ? ptr : nullptr;
  impl->bytes_.resize(size);
  impl->peer_.assign(size, nullptr);
  impl->imports_.resize(local_size);
  for (int r = 0; r < size; ++r) impl->bytes_[r] = cards[r].bytes;
  const bool contiguous = node_ranks.back() - node_ranks.front() + 1 == local_size;
  const std::size_t entries_bytes = sizeof(DeviceWindowEntry) * local_size;
  const std::size_t table_bytes =
      entries_bytes + (contiguous ? 0 : sizeof(std::int16_t) * static_cast<std::size_t>(size));
  err = nullptr;
  try {
    for (int i = 0; i < local_size; ++i) {
      const int r = node_ranks[i];
      if (i == me || cards[r].bytes == 0) continue;
      if (cards[r].desc.kind == platform::BufferShareKind::SymmetricHeap) {
        impl->peer_[r] = impl->ctx_.heap->peer_base(i) + cards[r].desc.ptr_offset;
        continue;
      }
      impl->imports_[i] =
          backend.import_buffer(cards[r].desc, sends_fd(cards[r].desc.kind) ? peer_fds[i] : -1);
      impl->peer_[r] = impl->imports_[i].ptr;
    }
    impl->peer_[rank] = impl->local_;
    std::vector<unsigned char> table(table_bytes, 0);
    auto* entries = reinterpret_cast<DeviceWindowEntry*>(table.data());
    for (int i = 0; i < local_size; ++i) {
      entries[i].address = reinterpret_cast<std::uintptr_t>(impl->peer_[node_ranks[i]]);
      entries[i].bytes = entries[i].address ? cards[node_ranks[i]].bytes : 0;
    }
    if (!contiguous) {
      std::vector<std::int16_t> index(size, -1);
      for (int i = 0; i < local_size; ++i) index[node_ranks[i]] = static_cast<std::int16_t>(i);
      std::memcpy(table.data() + entries_bytes, index.data(), sizeof(std::int16_t) * size);
    }
    impl->table_ = backend.alloc_device(table_bytes);
    backend.copy(impl->table_, table.data(), table_bytes, impl->ctx_.stream);
    backend.stream_synchronize(impl->ctx_.stream);
  } catch (...) {
    err = std::current_exception();
  }
  for (int fd : peer_fds) ::close(fd);
  agree_step(bootstrap, err, "register_buffer (mapping node peers' buffers)",
             [&] { impl->release(); });

  DeviceWindow& h = impl->handle_;
  h.peers_ = static_cast<const DeviceWindowEntry*>(impl->table_);
  h.local_index_ = contiguous
                       ? nullptr
                       : reinterpret_cast<const std::int16_t*>(
                             static_cast<const unsigned char*>(impl->table_) + entries_bytes);
  h.rank_ = rank;
  h.size_ = size;
  h.local_size_ = local_size;
  h.node_first_ = node_ranks.front();
  h.node_contiguous_ = contiguous;
  impl->registered_ = true;
  if (WindowStats* s = impl->ctx_.stats) {
    s->windows += 1;
    s->registered += bytes;
    for (int i = 0; i < local_size; ++i) s->peer_mapped += impl->imports_[i].mapping_bytes;
    s->tables += table_bytes;
  }
  GNIO_INFO(
      Memory, "rank %d: registered window #%llu: %zu bytes at %p, %d node peers mapped", rank,
      static_cast<unsigned long long>(id), bytes, ptr,
      static_cast<int>(std::count_if(impl->imports_.begin(), impl->imports_.end(),
                                     [](const platform::ImportedBuffer& b) { return b.ptr; })));
  return impl;
}

WindowImpl::~WindowImpl() {
  if (!registered_) {
    release();
    return;
  }
  try {
    std::lock_guard<std::mutex> lock(*ctx_.mutex);
    deregister(false);
  } catch (const std::exception& e) {
    GNIO_WARN(Memory, "deregistering window #%llu at destruction: %s",
              static_cast<unsigned long long>(id_), e.what());
    release();
  }
}

void WindowImpl::release() noexcept {
  for (platform::ImportedBuffer& b : imports_)
    if (b.mapping) ctx_.backend->release_import(b);
  if (table_) ctx_.backend->free_device(table_);
  table_ = nullptr;
  std::fill(peer_.begin(), peer_.end(), nullptr);
}

void WindowImpl::deregister(bool explicit_call) {
  if (!registered_) return;
  Bootstrap& bootstrap = *ctx_.bootstrap;
  const bool peers_alive = !(ctx_.aborted && ctx_.aborted());
  // 1. This rank's kernels are done with every buffer of the window.
  std::exception_ptr device_error;
  try {
    ctx_.backend->device_synchronize();
  } catch (...) {
    device_error = std::current_exception();
  }
  // 2. Every rank is here, for this window, with its device work done.
  if (peers_alive) {
    std::vector<DeregisterCard> cards(bootstrap.size());
    cards[bootstrap.rank()] = {id_, device_error ? 0u : 1u};
    bootstrap.allgather(cards.data(), sizeof(DeregisterCard));
    std::string other_ids, failed;
    for (int r = 0; r < bootstrap.size(); ++r) {
      if (cards[r].id != id_) other_ids += (other_ids.empty() ? "" : ", ") + std::to_string(r);
      if (!cards[r].device_ok) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!other_ids.empty()) {
      if (explicit_call)
        fail(ErrorClass::InvalidArgument,
             "rank %d: deregister is collective and every rank must deregister the same window, "
             "in the same order: this rank deregisters window #%llu, ranks %s another one; "
             "nothing was deregistered",
             bootstrap.rank(), static_cast<unsigned long long>(id_), other_ids.c_str());
      GNIO_WARN(Memory,
                "rank %d: window #%llu was destroyed while ranks %s destroyed another window; "
                "destroy windows in the same order on every rank. Unmapping anyway (every rank's "
                "device work is done)",
                bootstrap.rank(), static_cast<unsigned long long>(id_), other_ids.c_str());
    }
    if (!failed.empty() && explicit_call) {
      if (device_error) std::rethrow_exception(device_error);
      fail(ErrorClass::RemoteError,
           "rank %d: deregister: the device work of ranks %s failed; the window stays registered",
           bootstrap.rank(), failed.c_str());
    }
  } else if (device_error && explicit_call) {
    std::rethrow_exception(device_error);
  }
  // 3. Unmap the peers' buffers, then wait until every rank did, so that each owner may free
  // its buffer as soon as this returns (freeing CUDA IPC memory a peer still has open is
  // undefined).
  const std::size_t peer_bytes = [&] {
    std::size_t n = 0;
    for (const platform::ImportedBuffer& b : imports_) n += b.mapping_bytes;
    return n;
  }();
  const std::size_t table_bytes =
      table_ ? sizeof(DeviceWindowEntry) * handle_.local_size_ +
                   (handle_.node_contiguous_ ? 0 : sizeof(std::int16_t) * size())
             : 0;
  release();
  registered_ = false;
  handle_ = DeviceWindow{};
  if (WindowStats* s = ctx_.stats) {
    s->windows -= 1;
    s->registered -= bytes_.empty() ? 0 : bytes_[bootstrap.rank()];
    s->peer_mapped -= peer_bytes;
    s->tables -= table_bytes;
  }
  if (peers_alive) {
    try {
      bootstrap.barrier();
    } catch (...) {
      if (explicit_call) throw;
      GNIO_WARN(Memory, "window #%llu: not every rank finished deregistering",
                static_cast<unsigned long long>(id_));
    }
  }
}

void WindowImpl::require_registered(const char* what) const {
  GNIO_REQUIRE(registered_, "Window::%s: the window was deregistered", what);
}

std::size_t WindowImpl::bytes(int rank) const {
  require_registered("bytes");
  GNIO_REQUIRE(rank >= 0 && rank < size(), "Window::bytes: rank %d is not in [0, %d)", rank,
               size());
  return bytes_[rank];
}

void* WindowImpl::local() const {
  require_registered("local");
  return local_;
}

void* WindowImpl::peer(int rank) const {
  require_registered("peer");
  GNIO_REQUIRE(rank >= 0 && rank < size(), "Window::peer: rank %d is not in [0, %d)", rank, size());
  return peer_[rank];
}

DeviceWindow WindowImpl::device() const {
  require_registered("device");
  return handle_;
}

}  // namespace detail

// ---- the public host object -------------------------------------------------------------------

namespace {
const detail::WindowImpl& require_impl(const std::shared_ptr<detail::WindowImpl>& impl,
                                       const char* what) {
  GNIO_REQUIRE(impl != nullptr,
               "Window::%s: the window is empty (default-constructed or "
               "deregistered with Comm::deregister)",
               what);
  return *impl;
}
}  // namespace

bool Window::valid() const noexcept {
  return impl_ && impl_->registered();
}
int Window::size() const {
  return require_impl(impl_, "size").size();
}
std::size_t Window::bytes(int rank) const {
  return require_impl(impl_, "bytes").bytes(rank);
}
void* Window::local() const {
  return require_impl(impl_, "local").local();
}
void* Window::peer(int rank) const {
  return require_impl(impl_, "peer").peer(rank);
}
bool Window::reachable(int rank) const {
  return peer(rank) != nullptr;
}
DeviceWindow Window::device_handle() const {
  return require_impl(impl_, "device").device();
}

}  // namespace gnio
