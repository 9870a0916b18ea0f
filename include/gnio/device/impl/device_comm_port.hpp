// DeviceCommPort: how gnio's own code reaches what DeviceComm keeps private, its state and the
// transport machinery behind its operations. The collectives and channels (device code built on
// DeviceComm) record failures and wait through it the way DeviceComm's own operations do; the
// host fills a handle's state through it (Comm::device_handle). Not part of the user's API.
#pragma once

#include <cstdint>

#include "gnio/device/device_comm.hpp"

namespace gnio::detail {

struct DeviceCommPort {
  GNIO_HD_INLINE static DeviceCommState& state(DeviceComm& dc) { return dc; }
  GNIO_HD_INLINE static const DeviceCommState& state(const DeviceComm& dc) { return dc; }

  /// DeviceComm::report: records a failure (first one wins); later waits return Aborted.
  GNIO_HD_INLINE static void report(const DeviceComm& dc, Status status, const char* op, int peer,
                                    std::uint64_t heap_offset, std::uint64_t expected,
                                    std::uint64_t seen, Cmp cmp, std::uint64_t waited_ns,
                                    CallSite site) {
    dc.report(status, op, peer, heap_offset, expected, seen, cmp, waited_ns, site);
  }
  /// DeviceComm::wait_until: polls `ready(seen)`, bounded by the abort word and the deadline.
  template <class Ready>
  GNIO_HD_INLINE static Status wait_until(const DeviceComm& dc, Ready ready, const char* op,
                                          int peer, std::uint64_t heap_offset, Cmp cmp,
                                          std::uint64_t expected, CallSite site) {
    return dc.wait_until(ready, op, peer, heap_offset, cmp, expected, site);
  }
  /// DeviceComm::proxy_put: the group's leader posts a put descriptor once the whole group is
  /// there.
  template <class Coop>
  GNIO_HD_INLINE static void proxy_put(const DeviceComm& dc, const ProxyDesc& desc,
                                       bool wait_consumed, const char* op, CallSite site,
                                       bool post = true) {
    dc.template proxy_put<Coop>(desc, wait_consumed, op, site, post);
  }
  /// DeviceComm::proxy_post: posts a descriptor to the proxy ring (bounded waits for a credit).
  GNIO_HD_INLINE static bool proxy_post(const DeviceComm& dc, const ProxyDesc& desc,
                                        bool wait_consumed, const char* op, CallSite site,
                                        std::uint64_t* ticket = nullptr) {
    return dc.proxy_post(desc, wait_consumed, op, site, ticket);
  }
};

}  // namespace gnio::detail
