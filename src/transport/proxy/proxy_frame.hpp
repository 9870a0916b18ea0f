// The proxy transport's wire format: one fixed 64-byte frame per message, followed by the data
// of a put. The receiver checks every frame against the job token and its own heap before it
// writes a byte; the checks live here, apart from the sockets, so that a fuzzer can reach them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gnio::proxy {

inline constexpr std::uint32_t kFrameMagic = 0x474e5046;  // "GNPF"
/// Frame types beyond the ProxyOp values (Put, PutSignal, Signal, Get, Atomic).
inline constexpr std::uint32_t kFrameAck = 16;  ///< count = operations of the receiver applied
inline constexpr std::uint32_t kFrameBye = 17;  ///< the sender leaves; end of file follows
/// The answer to a Get: `bytes` of data follow for the requester's ticket `count`.
inline constexpr std::uint32_t kFrameGetReply = 18;
/// The answer to an Atomic: `value` is the old value, for the requester's ticket `count`.
inline constexpr std::uint32_t kFrameAtomicReply = 19;
inline constexpr std::size_t kFrameBytes = 64;

/// Every message on a proxy connection, in the sender's byte order (both ends run the same build
/// on the same architecture; the magic catches anything else).
struct Frame {
  std::uint32_t magic;
  std::uint32_t type;  ///< ProxyOp, kFrameAck, kFrameBye, kFrameGetReply or kFrameAtomicReply
  std::uint64_t token;
  std::uint64_t dst_offset;
  std::uint64_t bytes;
  std::uint64_t sig_offset;
  std::uint64_t value;
  std::uint32_t sig_op;
  std::uint32_t region;  ///< Put/PutSignal/Signal: the target region (0 = heap; kProxyRegionShift)
  std::uint64_t count;
};
static_assert(sizeof(Frame) == kFrameBytes);

/// What a received frame asks for, once checked.
enum class FrameKind {
  Invalid,
  Put,
  PutSignal,
  Signal,
  Ack,
  Bye,
  Get,
  Atomic,
  GetReply,
  AtomicReply
};

struct FrameVerdict {
  FrameKind kind = FrameKind::Invalid;
  const char* why = nullptr;  ///< why the frame is refused (kind Invalid); static text
  /// True for Put and PutSignal: `bytes` of data follow, for [dst_offset, dst_offset + bytes).
  bool has_data() const { return kind == FrameKind::Put || kind == FrameKind::PutSignal; }
  /// True for GetReply and AtomicReply: they answer one of the receiver's own requests (ticket
  /// `count`), which the receiver checks against what it asked for.
  bool is_reply() const { return kind == FrameKind::GetReply || kind == FrameKind::AtomicReply; }
  /// True for PutSignal and Signal: the 8-byte word at sig_offset gets `value`.
  bool has_signal() const { return kind == FrameKind::PutSignal || kind == FrameKind::Signal; }
};

/// Checks a frame received from a peer of job `token` against this rank's heap of `heap_bytes`
/// and, for frames that name a landing region, that region's `landing_bytes` (0: no such
/// region): magic and token, a known type, data and signal ranges inside the region they name
/// (no overflow), the signal word 8-byte aligned, a known signal op; a Get's range inside the
/// heap; an Atomic's word 4 or 8 bytes wide, aligned, inside the heap, with a known AtomicOp
/// (gets and atomics reach the heap only). Replies are checked by the receiver against its open
/// requests. Anything else is Invalid with the reason.
FrameVerdict check_frame(const Frame& f, std::uint64_t token, std::uint64_t heap_bytes,
                         std::uint64_t landing_bytes);

/// The goodbye of job `token`: the sender of a connection leaves in order (and, on connections
/// opened on first use, the receiving side stops reading in order).
inline Frame bye_frame(std::uint64_t token) {
  return Frame{kFrameMagic, kFrameBye, token, 0, 0, 0, 0, 0, 0, 0};
}

/// True when [offset, offset + bytes) lies inside a heap of `heap` bytes (no overflow).
bool inside_heap(std::uint64_t offset, std::uint64_t bytes, std::uint64_t heap);

}  // namespace gnio::proxy
