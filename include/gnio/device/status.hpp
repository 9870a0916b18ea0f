// What device-side operations report, and the record a failed wait leaves for the host.
#pragma once

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "gnio/device/macros.hpp"

namespace gnio {

/// Outcome of a device-side wait, test or barrier.
enum class Status : std::uint32_t {
  /// Success. Zero, as are `Status{}` and the status of a StallRecord nobody wrote (zero-filled);
  /// the failures below are numbered on from 1, in order.
  Ok = 0,
  /// The wait's deadline (GNIO_TIMEOUT) passed; a StallRecord says where.
  Timeout,
  /// The communicator was aborted (Comm::abort or an earlier device error); nothing waited.
  Aborted,
  /// The peer is not reachable by any transport compiled in and configured.
  Unsupported,
  /// A bad argument reached the device (peer out of range, ...).
  InvalidArgument,
  /// A rank of the communicator died or became unreachable (seen by the host's liveness
  /// watcher); nothing waited. DeviceComm::failed_rank() names it.
  RemoteError,
};

/// Comparison of wait_signal/test: is `seen <cmp> value`?
enum class Cmp : std::uint32_t { Eq, Ne, Gt, Ge, Lt, Le };

GNIO_HD_INLINE bool compare(std::uint64_t seen, Cmp cmp, std::uint64_t value) {
  switch (cmp) {
    case Cmp::Eq: return seen == value;
    case Cmp::Ne: return seen != value;
    case Cmp::Gt: return seen > value;
    case Cmp::Ge: return seen >= value;
    case Cmp::Lt: return seen < value;
    default: return seen <= value;
  }
}

/// Where a device operation gave up, written once per communicator into host-mapped memory by
/// the first thread that fails (with plain stores: no atomics on host memory); Comm::check()
/// turns it into a gnio::Error.
struct StallRecord {
  std::uint32_t state;        ///< 0 empty, 2 complete (release-published by the device)
  Status status;              ///< why
  std::int32_t rank;          ///< the rank that stalled
  std::int32_t peer;          ///< the peer it waited on or addressed (-1 if none/several)
  std::uint64_t heap_offset;  ///< symmetric-heap offset of the watched word (~0 if none)
  std::uint64_t expected;     ///< the value compared against
  std::uint64_t seen;         ///< the last value read
  std::uint32_t cmp;          ///< Cmp used
  std::uint32_t line;         ///< call site line
  std::uint64_t waited_ns;    ///< how long it waited
  char op[32];                ///< operation name ("wait_signal", "barrier", "put", ...)
  char file[96];              ///< call site file (tail of the path)
};

/// DeviceControl::abort values.
inline constexpr std::uint32_t kAbortByHost = 1;    ///< Comm::abort()
inline constexpr std::uint32_t kAbortPeerLost = 3;  ///< a rank died; failed_rank names it

/// Control words shared between the host and every kernel of a communicator (host-mapped). No
/// word here is ever read-modify-written: a GPU may reach host memory over PCIe, where atomics on
/// it are not guaranteed (compute-sanitizer's memcheck refuses them), so each word has writers of
/// one kind and plain (release) stores.
struct DeviceControl {
  /// 0 = running; non-zero = stop waiting (one of the kAbort* values). Written by the host only.
  std::uint32_t abort;
  /// The lost rank when abort == kAbortPeerLost; written (relaxed) by the host before abort.
  std::uint32_t failed_rank;
  /// 1 once an error was recorded (a device wait's report, or the proxy's transport failure):
  /// every later wait stops. Only ever goes from 0 to 1.
  std::uint32_t error;
  StallRecord stall;
};

/// True once the communicator's waits must stop: an abort, or a recorded error (either side).
GNIO_HD_INLINE bool control_stopped(const DeviceControl& c, dev::Order order) {
  return dev::atomic_load(&c.abort, order) != 0 || dev::atomic_load(&c.error, order) != 0;
}

}  // namespace gnio
