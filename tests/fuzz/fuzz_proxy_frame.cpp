// libFuzzer target for the proxy transport's frame check (built with -DGNIO_FUZZ=ON and clang).
//
// The input is a frame as it would arrive from a peer (the first 64 bytes), then the receiver's
// heap size and the job token (8 bytes each, when present); a frame naming landing region 1 finds
// a region of the heap's size, any other region none. Whatever the check accepts must be safe to
// apply: the data range and the signal word inside the region the frame names, a get's range and
// an atomic's word inside the heap (never a landing region), without overflow, words aligned, the
// type, signal op and atomic op known (replies are matched against open requests by the receiver,
// not here); and the check must refuse with a reason otherwise.
// Half of the runs take the magic and token from the input as they are, the other half force them
// right so the fuzzer spends its time on the range checks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gnio/device/device_comm.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "transport/proxy/proxy_frame.hpp"

using namespace gnio::proxy;

namespace {

void require(bool cond) {
  if (!cond) std::abort();
}

std::uint64_t read_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

/// Independent restatement of the rule (no subtraction tricks: 128-bit sums).
bool fits(std::uint64_t offset, std::uint64_t bytes, std::uint64_t heap) {
  return static_cast<unsigned __int128>(offset) + bytes <= heap;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kFrameBytes) return 0;
  Frame f;
  std::memcpy(&f, data, kFrameBytes);
  const std::uint64_t heap = size >= kFrameBytes + 8 ? read_u64(data + kFrameBytes) : 1u << 20;
  std::uint64_t token = size >= kFrameBytes + 16 ? read_u64(data + kFrameBytes + 8) : 42;
  if (size % 2 == 0) {
    f.magic = kFrameMagic;
    token = f.token;
  }

  // A landing region of the heap's size when the frame names region 1, none otherwise.
  const std::uint64_t landing = f.region == 1 ? heap : 0;
  const FrameVerdict v = check_frame(f, token, heap, landing);
  if (v.kind == FrameKind::Invalid) {
    require(v.why != nullptr && v.why[0] != '\0');
    return 0;
  }
  require(v.why == nullptr);
  require(f.magic == kFrameMagic && f.token == token);
  switch (v.kind) {
    case FrameKind::Ack: require(f.type == kFrameAck); break;
    case FrameKind::Bye: require(f.type == kFrameBye); break;
    case FrameKind::Put: require(f.type == static_cast<std::uint32_t>(gnio::ProxyOp::Put)); break;
    case FrameKind::PutSignal:
      require(f.type == static_cast<std::uint32_t>(gnio::ProxyOp::PutSignal));
      break;
    case FrameKind::Signal:
      require(f.type == static_cast<std::uint32_t>(gnio::ProxyOp::Signal));
      break;
    case FrameKind::Get:
      require(f.type == static_cast<std::uint32_t>(gnio::ProxyOp::Get));
      require(f.region == 0);
      require(fits(f.dst_offset, f.bytes, heap));
      break;
    case FrameKind::Atomic:
      require(f.type == static_cast<std::uint32_t>(gnio::ProxyOp::Atomic));
      require(f.region == 0);
      require((f.bytes == 4 || f.bytes == 8) && f.dst_offset % f.bytes == 0);
      require(fits(f.dst_offset, f.bytes, heap));
      require(f.sig_op < gnio::kAtomicOpCount);
      break;
    case FrameKind::GetReply: require(f.type == kFrameGetReply); break;
    case FrameKind::AtomicReply: require(f.type == kFrameAtomicReply); break;
    default: std::abort();
  }
  if (v.has_data() || v.has_signal()) require(f.region <= 1);  // region 1 exists, no other
  if (v.has_data()) require(fits(f.dst_offset, f.bytes, heap));
  if (v.has_signal()) {
    require(fits(f.sig_offset, 8, heap) && f.sig_offset % 8 == 0);
    require(f.sig_op <= static_cast<std::uint32_t>(gnio::SignalOp::Add));
  }
  // inside_heap agrees with the independent rule everywhere.
  require(inside_heap(f.dst_offset, f.bytes, heap) == fits(f.dst_offset, f.bytes, heap));
  return 0;
}
