// Group operations mean what NVSHMEM users expect: a put by a whole group (Tile, Warp, Block)
// synchronizes the group at entry and at exit, so
//  * a signal sent by one member after the put follows every member's stores (the peer that sees
//    the signal sees all the data),
//  * every member's writes of the source before the call are what is copied (a source the group
//    just filled, shared memory included), and
//  * on return the source may be overwritten by any member (the next round's data never leaks
//    into the previous round's destination).
// Rank 0 puts R rounds into R separate regions of rank 1, refilling one source between rounds
// (each element by a member other than the one that copies it), and signals each round from its
// leader; rank 1 checks each region as soon as its signal arrives, and every region again at the
// end. Peer memory (ranks on one node); the proxy's group puts have always had both barriers.
#include <vector>

#include "common/gnio_test.hpp"

namespace rma_group_test {

using gnio::Block;
using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio::Thread;
using gnio::Tile;
using gnio::Warp;
using gnio_test::comm;
using gnio_test::group_threads;
using gnio_test::stream;

constexpr int kRounds = 8;
constexpr std::uint32_t kPoisonWord = 0xA5A5A5A5u;

GNIO_HD_INLINE std::uint32_t value(int round, std::size_t i) {
  const std::uint32_t v = static_cast<std::uint32_t>(round + 1) * 0x9E3779B1u ^
                          static_cast<std::uint32_t>(i * 2654435761u);
  return v == kPoisonWord ? v + 1 : v;
}

/// The source element a member writes as its j-th: j * 40503 mod n (n a power of two), so that
/// a member's elements are scattered and rarely the ones it copies (the copy splits the range into
/// contiguous or strided shares).
GNIO_HD_INLINE std::size_t scattered(std::size_t j, std::size_t n) {
  return (j * 40503u) & (n - 1);
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kGlobalWords = std::size_t{1} << 14;
#else
constexpr std::size_t kGlobalWords = std::size_t{1} << 18;
#endif

/// One group per rank: rank 0 sends, rank 1 checks (`early`: wrong elements seen right after a
/// round's signal; `late`: wrong elements once everything arrived).
template <class Coop>
void group_put_kernel(DeviceComm dc, SymPtr<std::uint32_t> dst, std::uint32_t* global_src,
                      bool shared_src, std::size_t n, SymPtr<std::uint64_t> ready,
                      unsigned long long* early, unsigned long long* late) {
  const unsigned threads = group_threads<Coop>();
  const std::size_t shared = shared_src ? n * sizeof(std::uint32_t) : 0;
  gnio::launch(stream(), {.grid = 1, .block = threads, .shared_bytes = shared}, [=] GNIO_HD() {
    const Coop g{};
    if (dc.rank() == 0) {
      std::uint32_t* src =
          shared_src ? static_cast<std::uint32_t*>(gnio::dev::shared_memory()) : global_src;
      for (int r = 0; r < kRounds; ++r) {
        for (std::size_t j = g.rank(); j < n; j += g.size()) {
          const std::size_t i = scattered(j, n);
          src[i] = value(r, i);
        }
        // No barrier here: the put's entry barrier must order the fill before every copy.
        dc.put<Coop>(dst + static_cast<std::size_t>(r) * n, src, n, 1);
        // One member signals for all (after the put's exit barrier).
        if (g.leader()) {
          dc.fence(1);
          dc.signal(ready, static_cast<std::uint64_t>(r + 1), SignalOp::Set, 1);
        }
      }
    } else if (dc.rank() == 1) {
      const std::uint32_t* got = dc.local(dst);
      unsigned long long bad = 0;
      for (int r = 0; r < kRounds; ++r) {
        (void)dc.wait_signal<Coop>(ready, Cmp::Ge, static_cast<std::uint64_t>(r + 1));
        for (std::size_t i = g.rank(); i < n; i += g.size())
          bad += gnio::dev::atomic_load(const_cast<std::uint32_t*>(got + r * n + i),
                                        gnio::dev::Order::Relaxed) != value(r, i);
      }
      gnio::dev::atomic_fetch_add(early, bad, gnio::dev::Order::Relaxed);
    }
    (void)dc.barrier<Coop>(dc.world());
    if (dc.rank() == 1) {
      const std::uint32_t* got = dc.local(dst);
      unsigned long long bad = 0;
      for (std::size_t i = g.rank(); i < kRounds * n; i += g.size())
        bad += got[i] != value(static_cast<int>(i / n), i % n);
      gnio::dev::atomic_fetch_add(late, bad, gnio::dev::Order::Relaxed);
    }
  });
}

template <class Coop>
void check_group_put(bool shared_src, const char* name) {
  gnio::Comm& c = comm();
  if (c.nodes() > 1) GTEST_SKIP() << "peer memory only (ranks on one node)";
  // Large enough that members finish their shares at visibly different times.
  const std::size_t n = shared_src ? 8192 : kGlobalWords;
  SymPtr<std::uint32_t> dst = c.alloc<std::uint32_t>(kRounds * n);
  SymPtr<std::uint64_t> ready = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint32_t*>(c.alloc_device(n * sizeof(std::uint32_t)));
  auto* counts = static_cast<unsigned long long*>(c.alloc_device(2 * sizeof(unsigned long long)));
  std::vector<std::uint32_t> poison(kRounds * n, kPoisonWord);
  gnio_test::to_device(c.local(dst), poison.data(), poison.size() * sizeof(std::uint32_t));
  const std::uint64_t zero[2] = {0, 0};
  gnio_test::to_device(c.local(ready), zero, sizeof(std::uint64_t));
  gnio_test::to_device(counts, zero, sizeof(zero));
  c.bootstrap().barrier();
  group_put_kernel<Coop>(c.device_handle(), dst, src, shared_src, n, ready, counts, counts + 1);
  c.synchronize(stream());
  unsigned long long got[2] = {1, 1};
  gnio_test::to_host(got, counts, sizeof(got));
  if (c.rank() == 1) {
    EXPECT_EQ(got[0], 0u) << name << ": elements missing when the leader's signal arrived";
    EXPECT_EQ(got[1], 0u) << name
                          << ": elements wrong at the end (source reused too early, or "
                             "copied before the group filled it)";
  }
  c.bootstrap().barrier();
  c.free_device(counts);
  c.free_device(src);
  c.free(ready);
  c.free(dst);
}

TEST(GroupPut, Thread) {
  check_group_put<Thread>(false, "thread");
}
TEST(GroupPut, Tile8) {
  check_group_put<Tile<8>>(false, "tile<8>");
}
TEST(GroupPut, Warp) {
  check_group_put<Warp>(false, "warp");
}
TEST(GroupPut, Block) {
  check_group_put<Block>(false, "block");
}
TEST(GroupPut, WarpFromSharedMemory) {
  check_group_put<Warp>(true, "warp, shared-memory source");
}
TEST(GroupPut, BlockFromSharedMemory) {
  check_group_put<Block>(true, "block, shared-memory source");
}

}  // namespace rma_group_test
