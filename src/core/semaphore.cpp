#include "gnio/semaphore.hpp"

#include "base/fail.hpp"
#include "core/comm_impl.hpp"
#include "platform/backend.hpp"

namespace gnio {

Semaphore::Semaphore(Comm& comm, std::uint32_t items, std::uint32_t info_bytes)
    : comm_(comm.impl()) {
  GNIO_REQUIRE(items >= 1 && items <= 65536, "Semaphore: %u items (1..65536)", items);
  GNIO_REQUIRE(info_bytes <= 65536, "Semaphore: %u info bytes per item (at most 65536)",
               info_bytes);
  // Status words one per 64-byte line, then the info records (zero-filled: every item Free).
  const std::size_t status_bytes = std::size_t{64} * items;
  memory_ = comm_->backend->alloc_host_mapped(status_bytes + std::size_t{info_bytes} * items + 64);
  view_.status = static_cast<std::uint32_t*>(memory_);
  view_.info = static_cast<std::uint8_t*>(memory_) + status_bytes;
  view_.items = items;
  view_.info_bytes = info_bytes;
}

Semaphore::~Semaphore() {
  comm_->backend->free_host_mapped(memory_);
}

}  // namespace gnio
