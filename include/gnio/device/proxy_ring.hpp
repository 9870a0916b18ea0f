// The proxy command ring: how device code hands an operation on a peer of another node to the
// host's proxy thread (src/transport/proxy/). The ring lives in memory the host reads (host
// backend: plain memory; cuda: host-pinned memory mapped into the GPU), so every slot is a
// fixed-size 64-byte descriptor that one PCIe write burst can carry, published by a release store
// of its sequence word written last. The device reserves a ticket with an atomic on the tail
// counter, which lives in device memory (atomics on host-mapped memory are not carried over every
// PCIe link), and waits for a credit (ticket - head < capacity) so it never overwrites a slot the
// proxy has not consumed; the proxy advances `head` once the descriptor is consumed (the source
// was read and sent, so a blocking put may return) and `done` once every earlier ticket was
// acknowledged as applied by the target (what quiet() waits for). A fetching atomic's old value
// comes back in the result slot of its ticket, which the device frees once it read it.
#pragma once

#include <cstdint>

#include "gnio/device/word_ops.hpp"

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
  /// heap with operand `value` (and, for CompareSwap, the expected value in `sig_offset`); with
  /// kProxyFetch in `flags` the old value comes back in the ticket's ProxyResult; the ticket is
  /// done once the target applied it
  Atomic = 5,
};

/// ProxyDesc::flags: an Atomic whose old value the device waits for.
inline constexpr std::uint32_t kProxyFetch = 1;
/// ProxyDesc::flags: a Put/PutSignal whose data the device copied into the slot's inline buffer
/// (ProxyHandle::inline_data), so the proxy sends it from there: no copy out of GPU memory, and
/// the source may be memory only the posting thread reaches (registers spilled to its stack,
/// shared memory).
inline constexpr std::uint32_t kProxyInline = 2;
/// Puts of at most this many bytes travel inline.
inline constexpr std::uint64_t kProxyInlineBytes = 256;
/// ProxyDesc::flags: a Put/PutSignal whose source is host memory of this rank's proxy (the outbox
/// of one of its landing regions), which the proxy sends from directly.
inline constexpr std::uint32_t kProxyHostSource = 4;
/// ProxyDesc::flags >> kProxyRegionShift: the target's region that dst_offset and sig_offset
/// name: 0 = its symmetric heap; k >= 1 = its proxy's landing region k, host memory the target's
/// proxy writes without any GPU work and device code there reads over the bus (how collectives
/// reach other nodes). Regions are registered collectively, so ids and layouts agree.
inline constexpr std::uint32_t kProxyRegionShift = 16;

/// One ring slot: exactly 64 bytes, `seq` written last (release) so a reader that sees
/// seq == ticket + 1 sees every other field.
struct alignas(64) ProxyDesc {
  std::uint64_t seq;  ///< ticket + 1 once published
  std::uint32_t op;   ///< ProxyOp
  std::int32_t peer;  ///< target world rank
  /// Put, PutSignal: source address; Get: destination address (this rank's memory: heap,
  /// device or host-pinned; the proxy stages GPU memory through bounce buffers)
  std::uint64_t src;
  std::uint64_t dst_offset;  ///< symmetric-heap offset of the data at the target
  std::uint64_t bytes;       ///< data bytes (0 for Signal)
  std::uint64_t sig_offset;  ///< symmetric-heap offset of the signal word (PutSignal, Signal)
  std::uint64_t value;       ///< signal operand
  std::uint32_t sig_op;      ///< SignalOp (Atomic: AtomicOp)
  std::uint32_t flags;       ///< kProxyFetch, kProxyInline, kProxyHostSource; region << 16
};
static_assert(sizeof(ProxyDesc) == 64, "a proxy descriptor is one 64-byte write");

/// Where the proxy returns a fetching atomic's old value: the slot of its ticket (ticket mod
/// capacity). The proxy writes `value`, then `seq` = ticket + 1 (release); the device thread
/// waiting for it reads the value and stores `seq` = 0, freeing the slot. (Waiting on the slot
/// itself rather than on `done` keeps a later ticket's result, which can arrive first, from
/// waiting for an earlier one.)
struct ProxyResult {
  std::uint64_t seq;
  std::uint64_t value;
};

/// The ring's proxy-written counters and its arrays, in host-mapped memory. Each counter sits on
/// its own cache line; only the proxy thread writes them.
struct ProxyRing {
  alignas(64) std::uint64_t head;  ///< tickets consumed by the proxy (slot free, source read)
  alignas(64) std::uint64_t done;  ///< every ticket below this was applied at its target
  /// Nonzero while the proxy thread that takes descriptors sleeps until its doorbell rings: an
  /// eventfd (`doorbell`), or with `doorbell` -1 this word itself as a futex. Device code on CPU
  /// threads (the host backend) rings it after a post (host_ring_doorbell), so there the proxy
  /// sleeps until work comes; a kernel on a GPU cannot, and the proxy's sleeps there stay short.
  alignas(64) std::uint32_t sleeping;
  std::int32_t doorbell;
  /// Tickets reserved before the latest fence() to a peer the proxy reaches (the largest such
  /// count; device code raises it with an atomic max). The proxy may let a large put overtake
  /// an earlier one that is still in flight only when no fence lies between them, that is when
  /// the earlier one's ticket is at least this.
  alignas(64) std::uint64_t fenced;
};

namespace detail {
/// Wakes the proxy thread asleep on `ring` (ProxyRing::sleeping), if it sleeps; otherwise costs an
/// atomic exchange. Host code only (CPU threads: the proxy's own, the host backend's kernels).
void host_ring_doorbell(ProxyRing* ring);
}  // namespace detail

/// The device-memory words of a proxy ring (one allocation): the ticket counter, and this GPU's
/// latest reading of the ring's host-memory counters `head` and `done`. Device threads that wait
/// for either read the copy here, and only one thread of the GPU at a time (the one that sets
/// `reading`) reads the counters themselves over the bus and raises the copies
/// (DeviceComm::proxy_wait). Each such read is a round trip over PCIe; thousands of threads polling
/// host memory at once (blocks waiting in quiet() while others still send) fill the link with them,
/// and the copy engines that move the proxy's staged data over the same link slow down several
/// times. Host backend: the counters are read directly (no bus).
struct ProxyDeviceWords {
  std::uint64_t tail;       ///< tickets reserved so far (device atomics)
  std::uint64_t head_seen;  ///< the largest ProxyRing::head a thread of this GPU read
  std::uint64_t done_seen;  ///< the largest ProxyRing::done a thread of this GPU read
  std::uint32_t reading;    ///< 1 while a thread reads the host-memory counters
};

/// What device code holds of the proxy (a DeviceComm member: kernel-parameter reads, not reads
/// across PCIe, for everything fixed at setup).
struct ProxyHandle {
  ProxyRing* ring = nullptr;          ///< host-mapped counters; nullptr = no proxy
  ProxyDeviceWords* words = nullptr;  ///< ticket counter and counter copies (device memory)
  ProxyDesc* slots = nullptr;         ///< `capacity` descriptors (host-mapped)
  ProxyResult* results = nullptr;     ///< `capacity` result slots (host-mapped)
  char* inline_data = nullptr;        ///< `capacity` x kProxyInlineBytes (host-mapped)
  std::uint64_t capacity = 0;         ///< slots (a power of two)
};

}  // namespace gnio
