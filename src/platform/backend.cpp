#include "platform/backend.hpp"

#include "base/fail.hpp"

namespace gnio::platform {

const char* to_string(BackendKind k) noexcept {
  return k == BackendKind::Cuda ? "cuda" : "host";
}

void require_deliverable_batch(const Delivery* d, std::size_t count, const char* who) {
  GNIO_REQUIRE(count <= kMaxDeliveryBatch, "%s: %zu deliveries (at most %zu)", who, count,
               kMaxDeliveryBatch);
  for (std::size_t i = 0; i < count; ++i)
    GNIO_REQUIRE(well_formed(d[i]) && d[i].bytes <= kMaxBatchedDeliveryBytes,
                 "%s: bad delivery %zu (%zu bytes %p -> %p, signal word %p, mark word %p)", who, i,
                 d[i].bytes, d[i].src, d[i].dst, static_cast<void*>(d[i].word),
                 static_cast<void*>(d[i].done));
}

}  // namespace gnio::platform
