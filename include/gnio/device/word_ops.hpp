// The operations on one word that travel between ranks, in one vocabulary: how put_signal/signal
// update a signal word (SignalOp) and which remote atomic a device call asks for (AtomicOp) are
// what users name; WordOp is what the target applies to the word (a proxy thread, a backend's
// word_atomic, a delivery), and word_op_of() maps the first two to it. Shared by the device API,
// the proxy command ring, the proxy frames and the platform backends, which need the words'
// meaning but not the rest of the device API.
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

/// What is applied to a word at its target (`operand` and `expected` as the caller names them).
enum class WordOp : std::uint32_t {
  Load,         ///< reads it
  Store,        ///< writes `operand`
  Add,          ///< adds `operand` (wrapping)
  Exchange,     ///< writes `operand`
  CompareSwap,  ///< writes `operand` if it holds `expected`
};

/// What a signal update applies.
constexpr WordOp word_op_of(SignalOp op) {
  return op == SignalOp::Set ? WordOp::Store : WordOp::Add;
}

/// What a remote atomic applies (the fetching and non-fetching forms alike: whether the old value
/// goes back is the caller's business).
constexpr WordOp word_op_of(AtomicOp op) {
  switch (op) {
    case AtomicOp::Fetch: return WordOp::Load;
    case AtomicOp::Set: return WordOp::Store;
    case AtomicOp::Add:
    case AtomicOp::FetchAdd: return WordOp::Add;
    case AtomicOp::CompareSwap: return WordOp::CompareSwap;
    case AtomicOp::Swap: return WordOp::Exchange;
  }
  return WordOp::Load;
}

}  // namespace gnio
