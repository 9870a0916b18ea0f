// check_frame, the receiving proxy's gate, on hand-made frames: what lands in the heap and what
// lands in a landing region is checked against that target's size, gets and atomics reach the
// heap only, a region nobody registered is refused, and every refusal says why.
#include <gtest/gtest.h>

#include <cstdint>

#include "gnio/device/device_comm.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "transport/proxy/proxy_frame.hpp"

namespace {

using gnio::ProxyOp;
using namespace gnio::proxy;

constexpr std::uint64_t kToken = 0x5eed;
constexpr std::uint64_t kHeap = 1 << 20, kLanding = 4096;

Frame frame(ProxyOp op, std::uint32_t region, std::uint64_t dst, std::uint64_t bytes,
            std::uint64_t sig = 0) {
  return Frame{kFrameMagic, static_cast<std::uint32_t>(op), kToken, dst, bytes, sig, 1, 0, region,
               0};
}

FrameKind kind(const Frame& f, std::uint64_t landing = kLanding) {
  const FrameVerdict v = check_frame(f, kToken, kHeap, landing);
  if (v.kind == FrameKind::Invalid) {
    EXPECT_TRUE(v.why && v.why[0]) << "a refusal says why";
  }
  return v.kind;
}

TEST(ProxyFrame, HeapFramesAreCheckedAgainstTheHeap) {
  EXPECT_EQ(kind(frame(ProxyOp::Put, 0, kHeap - 64, 64)), FrameKind::Put);
  EXPECT_EQ(kind(frame(ProxyOp::Put, 0, kHeap - 64, 65)), FrameKind::Invalid);
  EXPECT_EQ(kind(frame(ProxyOp::PutSignal, 0, 0, 8, kHeap - 8)), FrameKind::PutSignal);
  EXPECT_EQ(kind(frame(ProxyOp::PutSignal, 0, 0, 8, kHeap)), FrameKind::Invalid);
  EXPECT_EQ(kind(frame(ProxyOp::Get, 0, kHeap - 8, 8)), FrameKind::Get);
}

TEST(ProxyFrame, LandingFramesAreCheckedAgainstTheirRegion) {
  // Inside the landing region, though far smaller than the heap.
  EXPECT_EQ(kind(frame(ProxyOp::PutSignal, 1, kLanding - 128, 64, kLanding - 8)),
            FrameKind::PutSignal);
  EXPECT_EQ(kind(frame(ProxyOp::Signal, 1, 0, 0, kLanding - 8)), FrameKind::Signal);
  // Inside the heap but past the region's end: refused.
  EXPECT_EQ(kind(frame(ProxyOp::Put, 1, kLanding - 8, 16)), FrameKind::Invalid);
  EXPECT_EQ(kind(frame(ProxyOp::Signal, 1, 0, 0, kLanding)), FrameKind::Invalid);
  EXPECT_EQ(kind(frame(ProxyOp::Signal, 1, 0, 0, 12)), FrameKind::Invalid);  // unaligned word
  // Offsets that wrap around are not inside.
  EXPECT_EQ(kind(frame(ProxyOp::Put, 1, ~std::uint64_t{0} - 4, 16)), FrameKind::Invalid);
}

TEST(ProxyFrame, UnknownRegionIsRefused) {
  EXPECT_EQ(kind(frame(ProxyOp::Put, 7, 0, 8), 0), FrameKind::Invalid);
  EXPECT_EQ(kind(frame(ProxyOp::Signal, 7, 0, 0, 0), 0), FrameKind::Invalid);
}

TEST(ProxyFrame, GetsAndAtomicsReachTheHeapOnly) {
  EXPECT_EQ(kind(frame(ProxyOp::Get, 1, 0, 8)), FrameKind::Invalid);
  Frame atomic = frame(ProxyOp::Atomic, 0, 64, 8);
  atomic.sig_op = static_cast<std::uint32_t>(gnio::AtomicOp::FetchAdd);
  EXPECT_EQ(kind(atomic), FrameKind::Atomic);
  atomic.region = 1;
  EXPECT_EQ(kind(atomic), FrameKind::Invalid);
}

TEST(ProxyFrame, WrongTokenIsRefused) {
  Frame f = frame(ProxyOp::Put, 0, 0, 8);
  f.token = kToken + 1;
  EXPECT_EQ(kind(f), FrameKind::Invalid);
}

}  // namespace
