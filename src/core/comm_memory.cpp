// A communicator's memory (gnio::Comm's members): collective symmetric allocation and free, local
// and peer addresses, registered windows, device memory and copies, and the memory statistics.
#include <algorithm>
#include <memory>
#include <mutex>

#include "base/fail.hpp"
#include "core/comm_impl.hpp"
#include "gnio/comm.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio {

SymPtr<char> Comm::alloc_bytes(std::size_t bytes, std::size_t align) {
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->record(detail::host_op(detail::FlightEvent::Alloc, bytes));
  std::uint64_t off = impl_->heap->allocate(bytes, align);
  if (impl_->proxy) impl_->proxy->set_heap_bytes(impl_->heap->mapped());
  return SymPtr<char>{impl_->heap_id, 0, off};
}

void Comm::free_bytes(SymPtr<char> p) {
  if (p.is_null()) return;
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "free: the pointer belongs to another communicator's heap");
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  GNIO_REQUIRE(
      impl_->heap->allocation_size(p.offset) != 0,
      "free: offset 0x%llx is not a live symmetric allocation (double free?); nothing was freed",
      static_cast<unsigned long long>(p.offset));
  impl_->record(detail::host_op(detail::FlightEvent::Free, impl_->heap->allocation_size(p.offset)));
  impl_->backend->device_synchronize();
  // A kernel can end with its operations still in the proxy's hands (a credit signal, say): they
  // must land before any rank frees, or they land in whatever is allocated there next.
  if (impl_->proxy && !impl_->proxy->drain())
    fail(ErrorClass::Timeout,
         "free: operations this rank's kernels posted through the proxy were not acknowledged by "
         "their targets within the timeout; nothing was freed");
  impl_->bootstrap->barrier();
  impl_->heap->free(p.offset);
}

void* Comm::local_address(SymPtr<char> p) const {
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "local: the pointer is null or belongs to another communicator");
  return impl_->heap->local_base() + p.offset;
}

void* Comm::peer_address(SymPtr<char> p, int peer_rank) const {
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "peer: the pointer is null or belongs to another communicator");
  GNIO_REQUIRE(peer_rank >= 0 && peer_rank < size(), "peer: rank %d is not in [0, %d)", peer_rank,
               size());
  auto it = std::find(impl_->node_ranks.begin(), impl_->node_ranks.end(), peer_rank);
  if (it == impl_->node_ranks.end()) return nullptr;
  return impl_->heap->peer_base(static_cast<int>(it - impl_->node_ranks.begin())) + p.offset;
}

const char* Comm::heap_mapping() const noexcept {
  return to_string(impl_->heap->mapping());
}

Window Comm::register_buffer(void* ptr, std::size_t bytes) {
  detail::CommImpl& c = *impl_;
  c.check_alive();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.record(detail::host_op(detail::FlightEvent::Register, bytes));
  detail::WindowContext ctx;
  ctx.owner = impl_;
  ctx.backend = c.backend.get();
  ctx.bootstrap = c.bootstrap.get();
  ctx.fds = c.fds.get();
  ctx.node_ranks = c.node_ranks;
  ctx.local_index = c.local_rank;
  ctx.mutex = &c.mutex;
  ctx.aborted = [weak = std::weak_ptr<detail::CommImpl>(impl_)] {
    auto comm = weak.lock();
    return !comm || comm->aborted.load() || control_stopped(*comm->control, dev::Order::Acquire);
  };
  ctx.stream = c.internal_stream();
  ctx.stats = &c.window_stats;
  ctx.heap = c.heap.get();
  Window w(detail::register_window(std::move(ctx), c.next_window_id, ptr, bytes));
  ++c.next_window_id;
  return w;
}

void Comm::deregister(Window& window) {
  std::shared_ptr<detail::WindowImpl> impl = window.impl();
  if (!impl || !impl->registered()) {
    window = Window();
    return;
  }
  GNIO_REQUIRE(impl->context().owner.get() == static_cast<const void*>(impl_.get()),
               "deregister: the window was registered with another communicator");
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->record(detail::host_op(detail::FlightEvent::Deregister));
    impl->deregister(true);
  }
  // Outside the lock: dropping the last reference runs ~WindowImpl, which would lock again.
  window = Window();
}

void* Comm::alloc_device(std::size_t bytes) {
  return impl_->backend->alloc_device(bytes);
}
void Comm::free_device(void* p) {
  impl_->backend->free_device(p);
}
void Comm::copy(void* dst, const void* src, std::size_t bytes, StreamRef stream) {
  impl_->backend->copy(dst, src, bytes, stream);
}
void Comm::fill(void* dst, int value, std::size_t bytes, StreamRef stream) {
  impl_->backend->fill(dst, value, bytes, stream);
}

MemoryStats Comm::memory_stats() const {
  MemoryStats s;
  s.heap_mapped = impl_->heap->mapped();
  s.heap_in_use = impl_->heap->in_use();
  s.heap_internal = impl_->internal_bytes;
  s.heap_reserved_va = impl_->heap->reserved_va();
  s.peer_mapped = impl_->heap->mapped() * (impl_->node_ranks.size() - 1);
  s.host_pinned = sizeof(DeviceControl);
  const detail::WindowStats& w = impl_->window_stats;
  s.windows = w.windows.load();
  s.window_bytes = w.registered.load();
  s.window_peer_mapped = w.peer_mapped.load();
  s.device_tables =
      w.tables.load() +
      (impl_->heap->peer_base_table() ? sizeof(std::uint64_t) * impl_->node_ranks.size() : 0);
  return s;
}

}  // namespace gnio
