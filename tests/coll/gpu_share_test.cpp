// How ranks sharing a GPU cap a host collective's grid (src/coll/gpu_share.hpp): the cap must
// keep every sharing rank's grid resident, agree on every rank, and leave unshared GPUs alone.
#include "coll/gpu_share.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using gnio::detail::GpuShare;
using gnio::detail::resident_grid_limit;
using gnio::detail::share_of;
using gnio::platform::GpuIdentity;

GpuIdentity gpu(unsigned char id, int sms = 132, int cc = 90) {
  GpuIdentity g;
  g.uuid[0] = id;
  g.uuid[15] = 0x5a;
  g.sm_count = sms;
  g.compute_capability = cc;
  return g;
}

TEST(GpuShare, OneRankPerGpuLeavesTheGridAlone) {
  const GpuShare s = share_of({gpu(1), gpu(2), gpu(3), gpu(4)});
  EXPECT_EQ(s.ranks, 1u);
  EXPECT_EQ(s.sm_count, 132u);
  EXPECT_TRUE(s.same_gpus);
  EXPECT_EQ(resident_grid_limit(s, 2), ~0u);
}

TEST(GpuShare, RanksOnOneGpuSplitWhatItHolds) {
  // Four ranks on one H100 (two simulated nodes): 132 SMs x 2 blocks of 1024 threads = 264
  // resident blocks, 66 per rank; a kernel of which one SM holds only one block gets 33.
  const GpuShare s = share_of({gpu(7), gpu(7), gpu(7), gpu(7)});
  EXPECT_EQ(s.ranks, 4u);
  EXPECT_EQ(resident_grid_limit(s, 2), 66u);
  EXPECT_EQ(resident_grid_limit(s, 1), 33u);
  EXPECT_EQ(resident_grid_limit(s, 0), 33u);  // a failed query counts one block per SM
}

TEST(GpuShare, TheMostCrowdedGpuDecidesForEveryRank) {
  // Ranks 0-2 share GPU 1, rank 3 has GPU 2 alone: every rank caps by 3 so their grids agree.
  const GpuShare s = share_of({gpu(1), gpu(1), gpu(1), gpu(2)});
  EXPECT_EQ(s.ranks, 3u);
  EXPECT_EQ(resident_grid_limit(s, 2), 88u);
}

TEST(GpuShare, GpusOfDifferentKindsCountOneBlockPerSmOfTheSmallest) {
  const GpuShare s = share_of({gpu(1, 132), gpu(1, 132), gpu(2, 78, 80), gpu(2, 78, 80)});
  EXPECT_EQ(s.ranks, 2u);
  EXPECT_EQ(s.sm_count, 78u);
  EXPECT_FALSE(s.same_gpus);
  EXPECT_EQ(resident_grid_limit(s, 2), 39u);
}

TEST(GpuShare, RanksWithoutAGpuShareNothing) {
  const GpuShare none = share_of({GpuIdentity{}, GpuIdentity{}});
  EXPECT_EQ(none.ranks, 1u);
  EXPECT_EQ(none.sm_count, 0u);
  EXPECT_EQ(resident_grid_limit(none, 2), ~0u);
  const GpuShare mixed = share_of({gpu(3), gpu(3), GpuIdentity{}});
  EXPECT_EQ(mixed.ranks, 2u);
  EXPECT_FALSE(mixed.same_gpus);
  EXPECT_EQ(resident_grid_limit(mixed, 2), 66u);
}

TEST(GpuShare, MoreRanksThanSmsStillGetOneBlock) {
  const GpuShare s = share_of(std::vector<GpuIdentity>(200, gpu(9, 132)));
  EXPECT_EQ(s.ranks, 200u);
  EXPECT_EQ(resident_grid_limit(s, 1), 1u);
}

}  // namespace
