// Symmetric heap across 2..8 processes: equal offsets everywhere, data written by each rank read
// by every node peer through the flat mapping, alloc/free patterns, growth past the initial
// size, and collective misuse rejected with no effect.
#include <algorithm>
#include <random>

#include "common/gnio_test.hpp"

namespace heap_test {

using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::pattern_byte;
using gnio_test::stream;

/// True when every rank got the same offset.
bool same_everywhere(std::uint64_t offset) {
  std::vector<std::uint64_t> all(comm().size());
  all[comm().rank()] = offset;
  comm().bootstrap().allgather(all.data(), sizeof(std::uint64_t));
  return std::all_of(all.begin(), all.end(), [&](std::uint64_t o) { return o == all[0]; });
}

/// Each rank fills its copy with its pattern; every rank reads every node peer's copy and checks.
void check_visible_everywhere(SymPtr<std::uint8_t> p, std::size_t bytes, unsigned salt) {
  gnio::Comm& c = comm();
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t i = 0; i < bytes; ++i) host[i] = pattern_byte(c.rank(), i, salt);
  gnio_test::to_device(c.local(p), host.data(), bytes);
  c.bootstrap().barrier();
  for (int peer : c.node_ranks()) {
    std::vector<std::uint8_t> got(bytes), expected(bytes);
    for (std::size_t i = 0; i < bytes; ++i) expected[i] = pattern_byte(peer, i, salt);
    gnio_test::to_host(got.data(), c.peer(p, peer), bytes);
    EXPECT_EQ(gnio_test::count_wrong(got, expected, "peer " + std::to_string(peer)), 0u);
  }
  c.bootstrap().barrier();
}

TEST(Heap, EqualOffsetsAndPeerVisibility) {
  gnio::Comm& c = comm();
  std::vector<SymPtr<std::uint8_t>> ptrs;
  const std::size_t sizes[] = {1, 100, 4096, 12345, 1 << 20};
  for (std::size_t s : sizes) {
    ptrs.push_back(c.alloc<std::uint8_t>(s));
    EXPECT_TRUE(same_everywhere(ptrs.back().offset));
    EXPECT_EQ(ptrs.back().offset % 256, 0u);
  }
  for (std::size_t i = 0; i < ptrs.size(); ++i) check_visible_everywhere(ptrs[i], sizes[i], i);
  for (auto& p : ptrs) c.free(p);
}

TEST(Heap, FreeAndReuse) {
  gnio::Comm& c = comm();
  auto a = c.alloc<std::uint8_t>(1000);
  auto b = c.alloc<std::uint8_t>(1000);
  auto d = c.alloc<std::uint8_t>(1000);
  EXPECT_LT(a.offset, b.offset);
  EXPECT_LT(b.offset, d.offset);
  c.free(b);
  auto e = c.alloc<std::uint8_t>(500);  // fits in b's hole
  EXPECT_EQ(e.offset, b.offset);
  EXPECT_TRUE(same_everywhere(e.offset));
  check_visible_everywhere(e, 500, 7);
  c.free(a);
  c.free(d);
  c.free(e);
}

TEST(Heap, RandomAllocFreePatternStaysSymmetric) {
  gnio::Comm& c = comm();
  std::mt19937 rng(1234);  // the same sequence on every rank: allocation is collective
  std::vector<SymPtr<std::uint8_t>> live;
  for (int k = 0; k < 200; ++k) {
    if (!live.empty() && rng() % 3 == 0) {
      std::size_t i = rng() % live.size();
      c.free(live[i]);
      live.erase(live.begin() + i);
    } else {
      live.push_back(c.alloc<std::uint8_t>(1 + rng() % 100000));
      ASSERT_TRUE(same_everywhere(live.back().offset));
    }
  }
  // No two live allocations overlap (sizes known from the generator are not kept; check order).
  std::vector<std::uint64_t> offs;
  for (auto& p : live) offs.push_back(p.offset);
  std::sort(offs.begin(), offs.end());
  EXPECT_EQ(std::adjacent_find(offs.begin(), offs.end()), offs.end());
  for (auto& p : live) c.free(p);
}

TEST(Heap, GrowsPastInitialSizeAndKeepsData) {
  gnio::Comm& c = comm();
  const std::size_t before = c.memory_stats().heap_mapped;
  auto small = c.alloc<std::uint8_t>(4096);
  check_visible_everywhere(small, 4096, 1);
  // Larger than everything mapped so far: the heap must grow on every rank.
  auto big = c.alloc<std::uint8_t>(before + (8 << 20));
  EXPECT_GT(c.memory_stats().heap_mapped, before);
  EXPECT_TRUE(same_everywhere(big.offset));
  check_visible_everywhere(big, before + (8 << 20), 2);
  // The small buffer written before the growth is intact on every peer.
  for (int peer : c.node_ranks()) {
    std::vector<std::uint8_t> got(4096), expected(4096);
    for (std::size_t i = 0; i < 4096; ++i) expected[i] = pattern_byte(peer, i, 1);
    gnio_test::to_host(got.data(), c.peer(small, peer), 4096);
    EXPECT_EQ(gnio_test::count_wrong(got, expected, "after growth"), 0u);
  }
  c.free(big);
  c.free(small);
}

TEST(Heap, MismatchedSizesAreRejectedEverywhereWithNoEffect) {
  gnio::Comm& c = comm();
  const std::size_t in_use = c.memory_stats().heap_in_use;
  try {
    c.alloc<std::uint8_t>(c.rank() == 0 ? 100 : 200);
    ADD_FAILURE() << "mismatched alloc succeeded";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ranks 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.memory_stats().heap_in_use, in_use);
  // The communicator still works.
  auto p = c.alloc<std::uint8_t>(64);
  check_visible_everywhere(p, 64, 3);
  c.free(p);
}

TEST(Heap, DoubleFreeAndForeignPointersAreInvalidArgument) {
  gnio::Comm& c = comm();
  auto p = c.alloc<std::uint8_t>(64);
  c.free(p);
  EXPECT_THROW(c.free(p), gnio::Error);
  SymPtr<std::uint8_t> foreign{p.heap + 1, 0, 0};
  EXPECT_THROW(c.free(foreign), gnio::Error);
  EXPECT_THROW((void)c.local(foreign), gnio::Error);
  EXPECT_THROW((void)c.peer(p, c.size()), gnio::Error);
  c.free(SymPtr<std::uint8_t>{});  // null: ignored
  auto q = c.alloc<std::uint8_t>(64);
  check_visible_everywhere(q, 64, 4);
  c.free(q);
}

TEST(Heap, MemoryStatsReportOverhead) {
  gnio::MemoryStats s = comm().memory_stats();
  EXPECT_GT(s.heap_mapped, 0u);
  EXPECT_GT(s.heap_internal, 0u);
  EXPECT_GE(s.heap_reserved_va, s.heap_mapped * comm().local_size());
  EXPECT_EQ(s.peer_mapped, s.heap_mapped * (comm().local_size() - 1));
}

TEST(Comm, IdentityMatchesLauncher) {
  gnio::Comm& c = comm();
  const char* ws = std::getenv("WORLD_SIZE");
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(c.size(), std::atoi(ws));
  EXPECT_EQ(c.rank(), std::atoi(std::getenv("RANK")));
  EXPECT_EQ(c.local_size(), static_cast<int>(c.node_ranks().size()));
  EXPECT_EQ(c.node_ranks()[c.local_rank()], c.rank());
  EXPECT_FALSE(c.launch_source().empty());
}

}  // namespace heap_test
