#include "core/comm_services.hpp"

#include "base/fail.hpp"
#include "core/comm_impl.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio::detail {

CommServices::CommServices(const Comm& comm) : comm_(&comm), impl_(comm.impl().get()) {
  GNIO_ASSERT(impl_ != nullptr);
}

const std::vector<int>& CommServices::node_of_rank() const noexcept {
  return impl_->node_of_rank;
}
platform::Backend& CommServices::backend() const noexcept {
  return *impl_->backend;
}
std::mutex& CommServices::setup_mutex() const noexcept {
  return impl_->mutex;
}

Team CommServices::make_team(const std::vector<int>& members) const {
  return impl_->make_team(members);
}

SymPtr<char> CommServices::alloc_internal(std::size_t bytes, bool clear) const {
  return impl_->alloc_internal(bytes, clear);
}

bool CommServices::in_heap(const void* p, std::size_t bytes) const noexcept {
  const char* base = impl_->heap->local_base();
  const std::size_t mapped = impl_->heap->mapped();
  const char* c = static_cast<const char*>(p);
  return c >= base && static_cast<std::size_t>(c - base) <= mapped &&
         bytes <= mapped - static_cast<std::size_t>(c - base);
}

bool CommServices::has_network() const noexcept {
  return impl_->proxy != nullptr;
}

LandingRegion CommServices::add_landing(std::uint64_t inbox_bytes,
                                        std::uint64_t outbox_bytes) const {
  GNIO_ASSERT(impl_->proxy != nullptr);
  const proxy::Proxy::Landing l = impl_->proxy->add_landing(inbox_bytes, outbox_bytes);
  return LandingRegion{l.id, l.inbox, l.outbox};
}

void CommServices::barrier() const {
  impl_->bootstrap->barrier();
}
void CommServices::allgather(void* slots, std::size_t bytes) const {
  impl_->bootstrap->allgather(slots, bytes);
}

bool CommServices::flight_enabled() const noexcept {
  return impl_->flight.enabled();
}
void CommServices::record(const FlightEntry& e) const noexcept {
  impl_->record(e);
}

std::shared_ptr<void>& CommServices::coll_state() const noexcept {
  return impl_->coll_state;
}

}  // namespace gnio::detail
