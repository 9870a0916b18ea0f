// gnio::rank_ranges: how rank lists read in the library's messages (GNIO_CHECK's report) and in
// gnio-run's.
#include "gnio/rank_ranges.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

TEST(RankRanges, RunsOfThreeOrMoreReadAsRanges) {
  EXPECT_EQ(gnio::rank_ranges({}), "");
  EXPECT_EQ(gnio::rank_ranges({3}), "3");
  EXPECT_EQ(gnio::rank_ranges({0, 1, 2}), "0-2");
  EXPECT_EQ(gnio::rank_ranges({0, 1, 2, 3, 5, 6}), "0-3,5,6");
  EXPECT_EQ(gnio::rank_ranges({1, 4, 6, 7, 8, 10}), "1,4,6-8,10");
}

TEST(RankRanges, RunsOfTwoReadRankByRank) {
  EXPECT_EQ(gnio::rank_ranges({3, 4}), "3,4");
  EXPECT_EQ(gnio::rank_ranges({0, 2, 3}), "0,2,3");
}

}  // namespace
