// The operations on one 64-bit word that travel between ranks: how put_signal/signal update a
// signal word (SignalOp) and which remote atomic a device call asks for (AtomicOp). Shared by
// the device API, the proxy command ring and the transports, which need the words' meaning but
// not the rest of the device API.
#pragma once

#include <cstdint>

namespace gnio {

/// How a signal word is updated by put_signal/signal.
enum class SignalOp : std::uint32_t {
  Set,  ///< signal = value
  Add,  ///< signal += value (atomically)
};

/// The atomic a remote atomic call (a ProxyOp::Atomic descriptor, across nodes) asks for.
enum class AtomicOp : std::uint32_t { Fetch, Set, Add, FetchAdd, CompareSwap, Swap };
/// Number of AtomicOp values.
inline constexpr std::uint32_t kAtomicOpCount = 6;

}  // namespace gnio
