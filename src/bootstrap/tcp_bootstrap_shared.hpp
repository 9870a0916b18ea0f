// What TcpBootstrap's own source files share and its users must not see: the bound on error
// classes a peer's Error or Abort frame may carry, the names of the bootstrap's collectives in
// messages, and the bounded sleep between connection attempts. Separate from tcp_bootstrap.hpp,
// which the communicator, the liveness watcher, the rendezvous and the tcp mesh include.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "base/deadline.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/error.hpp"

namespace gnio::bootstrap {

/// decode_error_payload's `class_count`: a peer's error names one of this build's classes.
constexpr std::uint32_t kErrorClassCount = static_cast<std::uint32_t>(ErrorClass::Internal) + 1;

/// A collective's name in messages, from the kind a Coll frame carries in its flags.
inline const char* coll_name(std::uint16_t kind) {
  switch (static_cast<CollKind>(kind)) {
    case CollKind::Allgather: return "allgather";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Barrier: return "barrier";
  }
  return "an unknown collective";
}

// Sleeps for `ms` but not past the deadline.
inline void nap(int ms, const Deadline& deadline) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, deadline.remaining_ms(ms))));
}

}  // namespace gnio::bootstrap
