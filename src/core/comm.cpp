// The communicator's handle (gnio::Comm): its creation from the environment or a unique id, its
// shape, and the device handle its kernels use. The members are defined by concept: the state
// behind it (CommImpl's creation and teardown) in comm_impl.cpp, its symmetric memory and buffers
// in comm_memory.cpp, its teams in comm_teams.cpp, its failures and stream synchronisation in
// comm_failures.cpp; gnio::Stream in stream.cpp.
#include "gnio/comm.hpp"

#include <memory>
#include <string>
#include <vector>

#include "base/enum_names.hpp"
#include "base/fail.hpp"
#include "core/comm_impl.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio {

const char* to_string(Backend b) noexcept {
  return enum_name(b, {"auto", "cuda", "host"});
}

Comm::Comm(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
Comm::Comm(Comm&&) noexcept = default;
Comm& Comm::operator=(Comm&&) noexcept = default;
Comm::Comm(const Comm&) = default;
Comm& Comm::operator=(const Comm&) = default;
Comm::~Comm() = default;

Comm Comm::from_env(const CommOptions& options) {
  LaunchInfo info = launch_info_from_env();
  std::unique_ptr<Bootstrap> bs = Bootstrap::from_env();
  return Comm(std::make_shared<detail::CommImpl>(std::move(bs), std::move(info), options));
}

Comm Comm::from_unique_id(const UniqueId& id, int rank, int size, const CommOptions& options) {
  GNIO_REQUIRE(size > 0 && rank >= 0 && rank < size, "from_unique_id: rank %d is not in [0, %d)",
               rank, size);
  LaunchInfo info;
  info.rank = rank;
  info.size = size;
  info.source = "unique-id";
  std::unique_ptr<Bootstrap> bs = Bootstrap::create(id, rank, size);
  return Comm(std::make_shared<detail::CommImpl>(std::move(bs), std::move(info), options));
}

int Comm::rank() const noexcept {
  return impl_->bootstrap->rank();
}
int Comm::size() const noexcept {
  return impl_->bootstrap->size();
}
int Comm::local_rank() const noexcept {
  return impl_->local_rank;
}
int Comm::local_size() const noexcept {
  return static_cast<int>(impl_->node_ranks.size());
}
int Comm::node() const noexcept {
  return impl_->node;
}
int Comm::nodes() const noexcept {
  return impl_->nodes;
}
const std::string& Comm::node_id() const noexcept {
  return impl_->node_id;
}
const std::vector<int>& Comm::node_ranks() const noexcept {
  return impl_->node_ranks;
}
Backend Comm::backend() const noexcept {
  return impl_->backend_kind;
}
int Comm::device() const noexcept {
  return impl_->backend->device();
}
std::string Comm::device_description() const {
  return impl_->backend->describe();
}
const std::string& Comm::launch_source() const noexcept {
  return impl_->info.source;
}
Bootstrap& Comm::bootstrap() const {
  return *impl_->bootstrap;
}

DeviceComm Comm::device_handle() const {
  const detail::CommImpl& c = *impl_;
  DeviceComm handle;
  detail::DeviceCommState& d = detail::DeviceCommPort::state(handle);
  d.rank_ = rank();
  d.size_ = size();
  d.local_rank_ = c.local_rank;
  d.local_size_ = static_cast<int>(c.node_ranks.size());
  d.node_first_ = c.node_ranks.front();
  d.node_contiguous_ =
      c.node_ranks.back() - c.node_ranks.front() + 1 == static_cast<int>(c.node_ranks.size());
  d.heap_id_ = c.heap_id;
  d.heap_base_ = c.heap->base();
  d.heap_stride_ = c.heap->stride();
  d.heap_peer_base_ = c.heap->peer_base_table();
  d.heap_bytes_ = c.heap->mapped();
  d.local_index_ =
      reinterpret_cast<const std::int16_t*>(c.heap->local_base() + c.local_index_table.offset);
  d.control_ = c.control;
  d.stall_claim_ = reinterpret_cast<std::uint32_t*>(c.heap->local_base() + c.stall_claim.offset);
  d.timeout_ns_ = static_cast<std::uint64_t>(c.timeout_s * 1e9);
  d.proxy_ = c.proxy ? c.proxy->handle() : ProxyHandle{};
  d.world_ = c.world;
  d.node_ = c.node_team;
  return handle;
}

}  // namespace gnio
