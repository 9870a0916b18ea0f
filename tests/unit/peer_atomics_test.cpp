// The warning a GPU gets when it maps a peer's memory over a link without native atomics
// (PCIe-only cards): it names the peers and what is not atomic; none where every mapped peer has
// native atomics or where the peer cannot be mapped at all.
#include <gtest/gtest.h>

#include "platform/gpu_info.hpp"

namespace {

using gnio::platform::CudaDeviceInfo;
using gnio::platform::CudaPeerInfo;
using gnio::platform::peer_atomics_warning;

CudaPeerInfo peer(int ordinal, bool can_access, bool native_atomics) {
  CudaPeerInfo p;
  p.peer = ordinal;
  p.can_access = can_access;
  p.native_atomics = native_atomics;
  return p;
}

TEST(PeerAtomics, NamesEveryMappedPeerWithoutNativeAtomics) {
  CudaDeviceInfo d;
  d.ordinal = 0;
  d.peers = {peer(1, true, false), peer(2, true, true), peer(3, true, false),
             peer(4, false, false)};
  const std::string w = peer_atomics_warning(d);
  // 2 has native atomics, 4 is not mapped: neither is named.
  EXPECT_NE(w.find("GPU 0 reaches GPU(s) 1, 3 without native atomics"), std::string::npos) << w;
  EXPECT_NE(w.find("SignalOp::Add"), std::string::npos) << w;
}

TEST(PeerAtomics, NoWarningWhenEveryMappedPeerHasNativeAtomics) {
  CudaDeviceInfo d;
  d.ordinal = 2;
  d.peers = {peer(0, true, true), peer(1, false, false)};  // 1 is not mapped at all
  EXPECT_EQ(peer_atomics_warning(d), "");
  d.peers.clear();  // one GPU
  EXPECT_EQ(peer_atomics_warning(d), "");
}

}  // namespace
