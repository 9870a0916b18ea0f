#include "transport/proxy/proxy_frame.hpp"

#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/word_ops.hpp"

namespace gnio::proxy {

bool inside_heap(std::uint64_t offset, std::uint64_t bytes, std::uint64_t heap) {
  return offset <= heap && bytes <= heap - offset;
}

FrameVerdict check_frame(const Frame& f, std::uint64_t token, std::uint64_t heap_bytes,
                         std::uint64_t landing_bytes) {
  FrameVerdict v;
  auto refuse = [&](const char* why) {
    v.kind = FrameKind::Invalid;
    v.why = why;
    return v;
  };
  if (f.magic != kFrameMagic || f.token != token) return refuse("wrong magic or job token");
  switch (f.type) {
    case kFrameBye: v.kind = FrameKind::Bye; return v;
    case kFrameAck: v.kind = FrameKind::Ack; return v;
    case static_cast<std::uint32_t>(ProxyOp::Put): v.kind = FrameKind::Put; break;
    case static_cast<std::uint32_t>(ProxyOp::PutSignal): v.kind = FrameKind::PutSignal; break;
    case static_cast<std::uint32_t>(ProxyOp::Signal): v.kind = FrameKind::Signal; break;
    case static_cast<std::uint32_t>(ProxyOp::Get):
      if (f.region != 0) return refuse("a get from a landing region");
      if (!inside_heap(f.dst_offset, f.bytes, heap_bytes))
        return refuse("get range outside the heap");
      v.kind = FrameKind::Get;
      return v;
    case static_cast<std::uint32_t>(ProxyOp::Atomic):
      if (f.region != 0) return refuse("an atomic on a landing region");
      if ((f.bytes != 4 && f.bytes != 8) || f.dst_offset % f.bytes != 0 ||
          !inside_heap(f.dst_offset, f.bytes, heap_bytes))
        return refuse("atomic word not 4 or 8 bytes, not aligned or outside the heap");
      if (f.sig_op >= kAtomicOpCount) return refuse("unknown atomic op");
      v.kind = FrameKind::Atomic;
      return v;
    case kFrameGetReply: v.kind = FrameKind::GetReply; return v;
    case kFrameAtomicReply: v.kind = FrameKind::AtomicReply; return v;
    default: return refuse("unknown frame type");
  }
  if (f.region != 0 && landing_bytes == 0) return refuse("unknown landing region");
  const std::uint64_t target = f.region == 0 ? heap_bytes : landing_bytes;
  if (v.has_data() && !inside_heap(f.dst_offset, f.bytes, target))
    return refuse("data range outside the heap or landing region");
  if (v.has_signal() &&
      (!inside_heap(f.sig_offset, sizeof(std::uint64_t), target) || f.sig_offset % 8 != 0))
    return refuse("signal word outside the heap or landing region, or not 8-byte aligned");
  if (v.has_signal() && f.sig_op > static_cast<std::uint32_t>(SignalOp::Add))
    return refuse("unknown signal op");
  return v;
}

}  // namespace gnio::proxy
