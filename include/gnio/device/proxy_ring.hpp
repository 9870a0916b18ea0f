// The proxy command ring: how device code hands an operation on a peer of another node to the
// host's proxy thread (src/transport/proxy/). The ring lives in memory the host reads (host
// backend: plain memory; cuda: host-pinned memory mapped into the GPU), so every slot is a
// fixed-size 64-byte descriptor that one PCIe write burst can carry, published by a release store
// of its sequence word written last. The device reserves a ticket with an atomic on `tail` and
// waits for a credit (ticket - head < capacity) so it never overwrites a slot the proxy has not
// consumed; the proxy advances `head` once the descriptor is consumed (the source was read and
// sent, so a blocking put may return) and `done` once every earlier ticket was acknowledged as
// applied by the target (what quiet() waits for).
#pragma once

#include <cstdint>

namespace gnio {

/// What a proxy descriptor asks for.
enum class ProxyOp : std::uint32_t {
  Put = 1,  ///< copy `bytes` from `src` to `dst_offset` of `peer`'s heap
  PutSignal =
      2,  ///< Put, then update the signal at `sig_offset` (the target applies it after the data)
  Signal = 3,  ///< update the signal at `sig_offset` of `peer`
  /// copy `bytes` at `dst_offset` of `peer`'s heap to `src` (here the local destination, which
  /// the proxy writes; the ticket is done once the data is there)
  Get = 4,
  /// an AtomicOp (in `sig_op`) on the `bytes`-wide (4 or 8) word at `dst_offset` of `peer`'s
  /// heap with operand `value` (and, for CompareSwap, the expected value in `sig_offset`); the
  /// old value goes to the 8-byte word at `src` when it is not 0, and the ticket is done once the
  /// target applied it
  Atomic = 5,
};

/// The atomic a ProxyOp::Atomic descriptor asks for.
enum class AtomicOp : std::uint32_t { Fetch, Set, Add, FetchAdd, CompareSwap, Swap };
/// Number of AtomicOp values.
inline constexpr std::uint32_t kAtomicOpCount = 6;

/// One ring slot: exactly 64 bytes, `seq` written last (release) so a reader that sees
/// seq == ticket + 1 sees every other field.
struct alignas(64) ProxyDesc {
  std::uint64_t seq;  ///< ticket + 1 once published
  std::uint32_t op;   ///< ProxyOp
  std::int32_t peer;  ///< target world rank
  std::uint64_t src;  ///< source address (readable by the proxy; see docs/guide/multi-node.md)
  std::uint64_t dst_offset;  ///< symmetric-heap offset of the data at the target
  std::uint64_t bytes;       ///< data bytes (0 for Signal)
  std::uint64_t sig_offset;  ///< symmetric-heap offset of the signal word (PutSignal, Signal)
  std::uint64_t value;       ///< signal operand
  std::uint32_t sig_op;      ///< SignalOp
  std::uint32_t reserved;
};
static_assert(sizeof(ProxyDesc) == 64, "a proxy descriptor is one 64-byte write");

/// The ring's control words and slots. Each counter sits on its own cache line: `tail` is written
/// by device threads, `head` and `done` only by the proxy thread.
struct ProxyRing {
  alignas(64) std::uint64_t tail;      ///< tickets reserved so far (device atomic add)
  alignas(64) std::uint64_t head;      ///< tickets consumed by the proxy (slot free, source read)
  alignas(64) std::uint64_t done;      ///< every ticket below this was applied at its target
  alignas(64) std::uint64_t capacity;  ///< slots (a power of two)
  ProxyDesc* slots;                    ///< capacity descriptors
};

}  // namespace gnio
