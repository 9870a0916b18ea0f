// Host-backend kernel launch: every thread of every block runs once, concurrently, with the right
// coordinates; block and warp barriers order memory; warp broadcast; per-block shared memory;
// errors from kernel threads; launch-shape validation; and the cost of a launch.
#include "platform/host/host_launch.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/fail.hpp"
#include "gnio/device/thread.hpp"
#include "gnio/launch.hpp"
#include "host_test_util.hpp"

namespace {

using gnio::ErrorClass;
using gnio::LaunchDims;
using gnio_host_test::error_class_of;
using gnio_host_test::HostBackendTest;

using LaunchTest = HostBackendTest;

/// A value that depends on every argument, so a stale or misrouted read shows up as a mismatch
/// (and is never zero, the value of untouched memory).
std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (a * 0xBF58476D1CE4E5B9ull);
  h ^= (b + 0x632BE59BD9B4E019ull) * 0x94D049BB133111EBull;
  h ^= (c + 0x1234567ull) * 0xD6E8FEB86659FD93ull;
  h ^= (d + 0x89ABCDEFull) * 0xA0761D6478BD642Full;
  return h | 1;
}

/// What each launched thread saw of its own coordinates.
struct Seen {
  std::atomic<unsigned> hits{0};
  unsigned thread, block, block_dim, grid_dim, lane, warp, warps;
  std::size_t global, global_threads;
};

TEST_F(LaunchTest, EveryThreadRunsOnceWithItsCoordinates) {
  const LaunchDims shapes[] = {{1, 1},   {1, 32},   {1, 33},   {3, 64},  {8, 64},
                               {16, 17}, {1, 1024}, {1024, 1}, {5, 100}, {2, 512}};
  for (const LaunchDims& d : shapes) {
    SCOPED_TRACE(testing::Message() << "grid " << d.grid << " x block " << d.block);
    const std::size_t n = static_cast<std::size_t>(d.grid) * d.block;
    auto seen = std::make_unique<Seen[]>(n);
    Seen* s = seen.get();
    gnio::launch(stream(), d, [s] {
      namespace dev = gnio::dev;
      Seen& me = s[dev::global_thread()];
      me.thread = dev::thread();
      me.block = dev::block();
      me.block_dim = dev::block_size();
      me.grid_dim = dev::grid_size();
      me.lane = dev::lane();
      me.warp = dev::warp();
      me.warps = dev::warps_per_block();
      me.global = dev::global_thread();
      me.global_threads = dev::global_threads();
      me.hits.fetch_add(1, std::memory_order_relaxed);
    });
    sync();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Seen& me = s[i];
      const unsigned t = static_cast<unsigned>(i % d.block), b = static_cast<unsigned>(i / d.block);
      wrong += me.hits.load() != 1 || me.thread != t || me.block != b || me.block_dim != d.block ||
               me.grid_dim != d.grid || me.lane != t % 32 || me.warp != t / 32 ||
               me.warps != (d.block + 31) / 32 || me.global != i || me.global_threads != n;
    }
    EXPECT_EQ(wrong, 0u) << "#wrong threads out of " << n;
  }
  EXPECT_EQ(gnio::detail::t_host_thread, nullptr) << "the launching thread is not a kernel thread";
}

// Block 0 waits for a flag that only the last block sets, and a kernel on a second stream waits
// for the first: both only finish if all blocks of a grid, and kernels on different streams, run
// at the same time (never one after another).
TEST_F(LaunchTest, BlocksAndStreamsAreCoResident) {
  std::atomic<int> flags[3] = {};
  std::atomic<int>* f = flags;
  gnio::launch(stream(), {.grid = 16, .block = 8}, [f] {
    namespace dev = gnio::dev;
    if (dev::thread() != 0) return;
    if (dev::block() == 0) {
      for (std::uint32_t i = 0; f[0].load(std::memory_order_acquire) == 0; ++i) dev::poll_pause(i);
      f[1].store(1, std::memory_order_release);  // tell the other stream's kernel
      for (std::uint32_t i = 0; f[2].load(std::memory_order_acquire) == 0; ++i) dev::poll_pause(i);
    }
    if (dev::block() == dev::grid_size() - 1) f[0].store(1, std::memory_order_release);
  });
  CUstream_st* cuda = nullptr;
  gnio::detail::HostStream* other = nullptr;
  backend_->create_stream(&cuda, &other);
  gnio::launch(gnio::StreamRef(other), {.grid = 2, .block = 2}, [f] {
    namespace dev = gnio::dev;
    if (dev::global_thread() != 0) return;
    for (std::uint32_t i = 0; f[1].load(std::memory_order_acquire) == 0; ++i) dev::poll_pause(i);
    f[2].store(1, std::memory_order_release);
  });
  backend_->device_synchronize();
  backend_->destroy_stream(nullptr, other);
  EXPECT_EQ(flags[0].load() + flags[1].load() + flags[2].load(), 3);
}

// Every round, each thread writes its slot of shared memory, passes the block barrier and reads
// every other slot. A missing happens-before shows up as a wrong value here and as a race under
// ThreadSanitizer (the slots are plain, non-atomic memory).
TEST_F(LaunchTest, BlockBarrierOrdersWritesBeforeReads) {
  constexpr unsigned kRounds = 300;
  const LaunchDims d{.grid = 4, .block = 96, .shared_bytes = 96 * sizeof(std::uint64_t)};
  std::atomic<std::size_t> wrong{0}, checked{0};
  auto* w = &wrong;
  auto* c = &checked;
  gnio::launch(stream(), d, [w, c] {
    namespace dev = gnio::dev;
    auto* slots = static_cast<std::uint64_t*>(dev::shared_memory());
    const unsigned t = dev::thread(), n = dev::block_size(), b = dev::block();
    std::size_t bad = 0, seen = 0;
    for (unsigned r = 0; r < kRounds; ++r) {
      slots[t] = mix(b, r, t);
      dev::sync_block();
      // A different subset of slots each round, every slot over the rounds.
      for (unsigned k = 0; k < n; k += 7) {
        const unsigned j = (t + k + r) % n;
        bad += slots[j] != mix(b, r, j);
        ++seen;
      }
      dev::sync_block();  // nobody overwrites a slot before everyone has read it
    }
    w->fetch_add(bad);
    c->fetch_add(seen);
  });
  sync();
  EXPECT_EQ(wrong.load(), 0u) << "#wrong reads after sync_block out of " << checked.load();
  EXPECT_GT(checked.load(), 4u * 96 * kRounds);
}

// Same for the warp barrier, with a block whose last warp is partial (80 = 32 + 32 + 16 lanes):
// lanes of one warp exchange data through plain memory across sync_warp, with no block barrier.
TEST_F(LaunchTest, WarpBarrierOrdersWritesBeforeReadsIncludingPartialWarp) {
  constexpr unsigned kRounds = 500;
  constexpr unsigned kBlock = 80;
  std::vector<std::uint64_t> mem(3 * kBlock);
  std::uint64_t* slots = mem.data();
  std::atomic<std::size_t> wrong{0}, checked{0};
  auto* w = &wrong;
  auto* c = &checked;
  gnio::launch(stream(), {.grid = 3, .block = kBlock}, [slots, w, c] {
    namespace dev = gnio::dev;
    const unsigned t = dev::thread(), b = dev::block();
    const unsigned first = dev::warp() * 32;
    const unsigned lanes = dev::block_size() - first < 32 ? dev::block_size() - first : 32;
    std::uint64_t* mine = slots + b * dev::block_size();
    std::size_t bad = 0, seen = 0;
    for (unsigned r = 0; r < kRounds; ++r) {
      mine[t] = mix(b, r, t, 1);
      dev::sync_warp();
      for (unsigned k = 1; k < lanes; k += 3) {
        const unsigned j = first + (dev::lane() + k + r) % lanes;
        bad += mine[j] != mix(b, r, j, 1);
        ++seen;
      }
      dev::sync_warp();
    }
    w->fetch_add(bad);
    c->fetch_add(seen);
  });
  sync();
  EXPECT_EQ(wrong.load(), 0u) << "#wrong reads after sync_warp out of " << checked.load();
  EXPECT_GT(checked.load(), 0u);
}

TEST_F(LaunchTest, WarpBroadcastDeliversTheSourceLanesValueToEveryLane) {
  constexpr unsigned kRounds = 400;
  constexpr unsigned kBlock = 70;  // warps of 32, 32 and 6 lanes
  std::atomic<std::size_t> wrong{0}, checked{0};
  auto* w = &wrong;
  auto* c = &checked;
  gnio::launch(stream(), {.grid = 2, .block = kBlock}, [w, c] {
    namespace dev = gnio::dev;
    const unsigned first = dev::warp() * 32;
    const unsigned lanes = dev::block_size() - first < 32 ? dev::block_size() - first : 32;
    std::size_t bad = 0, seen = 0;
    for (unsigned r = 0; r < kRounds; ++r) {
      const unsigned src = (r * 7 + 3) % lanes;  // moves around, back-to-back broadcasts
      const std::uint64_t got =
          dev::warp_broadcast(mix(dev::block(), dev::warp(), dev::lane(), r), src);
      bad += got != mix(dev::block(), dev::warp(), src, r);
      ++seen;
    }
    w->fetch_add(bad);
    c->fetch_add(seen);
  });
  sync();
  EXPECT_EQ(wrong.load(), 0u) << "#wrong broadcasts out of " << checked.load();
  EXPECT_EQ(checked.load(), 2u * kBlock * kRounds);
}

TEST_F(LaunchTest, WarpBroadcastFromAMissingLaneIsInvalidArgument) {
  // The last warp of a 40-thread block has 8 lanes; lane 20 does not exist.
  gnio::launch(stream(), {.grid = 1, .block = 40}, [] {
    namespace dev = gnio::dev;
    if (dev::warp() == 1) dev::warp_broadcast(1, 20);
  });
  std::string msg;
  EXPECT_EQ(error_class_of([&] { sync(); }, &msg), ErrorClass::InvalidArgument);
  EXPECT_NE(msg.find("source lane 20"), std::string::npos) << msg;
}

// Each block's shared memory starts zeroed, is 16-byte aligned and is its own: blocks fill theirs
// with a block-specific pattern and must read back only their own.
TEST_F(LaunchTest, SharedMemoryIsPerBlockZeroedAndAligned) {
  constexpr std::size_t kBytes = 4096 + 24;  // not a multiple of 64: blocks must still not overlap
  constexpr unsigned kGrid = 6, kBlock = 64;
  std::vector<std::uintptr_t> bases(kGrid);
  std::uintptr_t* base = bases.data();
  std::atomic<std::size_t> nonzero{0}, wrong{0};
  auto* nz = &nonzero;
  auto* w = &wrong;
  for (int launch = 0; launch < 3; ++launch) {  // zeroed again for every launch
    gnio::launch(
        stream(), {.grid = kGrid, .block = kBlock, .shared_bytes = kBytes}, [base, nz, w, launch] {
          namespace dev = gnio::dev;
          auto* mem = static_cast<unsigned char*>(dev::shared_memory());
          const unsigned t = dev::thread(), n = dev::block_size(), b = dev::block();
          if (t == 0) base[b] = reinterpret_cast<std::uintptr_t>(mem);
          std::size_t bad = 0;
          for (std::size_t i = t; i < kBytes; i += n) bad += mem[i] != 0;
          nz->fetch_add(bad);
          dev::sync_block();
          for (std::size_t i = t; i < kBytes; i += n)
            mem[i] = static_cast<unsigned char>(mix(b, i, launch) >> 8);
          dev::sync_block();
          bad = 0;
          for (std::size_t i = (t * 13) % kBytes, k = 0; k < kBytes / n; ++k, i = (i + n) % kBytes)
            bad += mem[i] != static_cast<unsigned char>(mix(b, i, launch) >> 8);
          w->fetch_add(bad);
        });
    sync();
    for (unsigned b = 0; b < kGrid; ++b) {
      EXPECT_EQ(bases[b] % 16, 0u) << "block " << b;
      for (unsigned o = 0; o < kGrid; ++o)
        if (o != b) {
          EXPECT_TRUE(bases[o] >= bases[b] + kBytes || bases[b] >= bases[o] + kBytes)
              << "shared memory of blocks " << b << " and " << o << " overlaps";
        }
    }
  }
  EXPECT_EQ(nonzero.load(), 0u) << "#shared bytes not zero at kernel start";
  EXPECT_EQ(wrong.load(), 0u) << "#shared bytes overwritten by another block";
}

// A thread that throws is reported by synchronize(); the threads of its block waiting at a
// barrier are not left stuck (a finished thread leaves the barriers, as on the GPU).
TEST_F(LaunchTest, ThreadExceptionIsRethrownBySynchronizeAndDoesNotHangItsBlock) {
  std::atomic<int> passed{0};
  auto* p = &passed;
  gnio::launch(stream(), {.grid = 3, .block = 64}, [p] {
    namespace dev = gnio::dev;
    if (dev::block() == 1 && dev::thread() == 5)
      gnio::fail(ErrorClass::Timeout, "kernel thread %u of block %u gave up", dev::thread(),
                 dev::block());
    dev::sync_block();
    dev::sync_warp();
    dev::sync_block();
    p->fetch_add(1);
  });
  std::string msg;
  EXPECT_EQ(error_class_of([&] { sync(); }, &msg), ErrorClass::Timeout);
  EXPECT_NE(msg.find("kernel thread 5 of block 1 gave up"), std::string::npos) << msg;
  EXPECT_EQ(passed.load(), 3 * 64 - 1);

  // The error was reported once; the stream works again.
  std::atomic<int> ran{0};
  auto* r = &ran;
  gnio::launch(stream(), {.grid = 2, .block = 32}, [r] { r->fetch_add(1); });
  sync();
  EXPECT_EQ(ran.load(), 64);
}

// Threads returning early (before the barriers others still use) do not hang the block.
TEST_F(LaunchTest, EarlyReturnLeavesTheBarriers) {
  std::atomic<int> rounds{0};
  auto* r = &rounds;
  gnio::launch(stream(), {.grid = 2, .block = 100}, [r] {
    namespace dev = gnio::dev;
    if (dev::thread() % 3 == 1) return;  // a third of every warp leaves at once
    for (int i = 0; i < 50; ++i) {
      dev::sync_block();
      dev::sync_warp();
    }
    r->fetch_add(1);
  });
  sync();
  int expected = 0;
  for (unsigned t = 0; t < 100; ++t) expected += t % 3 != 1;
  EXPECT_EQ(rounds.load(), 2 * expected);
}

TEST_F(LaunchTest, RejectedShapesAreInvalidArgumentAndQueueNothing) {
  std::atomic<int> ran{0};
  auto* r = &ran;
  auto kernel = [r] { r->fetch_add(1); };
  const LaunchDims bad[] = {
      {.grid = 0, .block = 1},
      {.grid = 1, .block = 0},
      {.grid = 1, .block = 1025},
      {.grid = 1, .block = 1, .shared_bytes = (std::size_t{1} << 20) + 1},
      {.grid = 2, .block = 1024},
      {.grid = 1025, .block = 1},
  };
  for (const LaunchDims& d : bad) {
    std::string msg;
    EXPECT_EQ(error_class_of([&] { gnio::launch(stream(), d, kernel); }, &msg),
              ErrorClass::InvalidArgument)
        << "grid " << d.grid << " block " << d.block << " shared " << d.shared_bytes;
    if (static_cast<std::size_t>(d.grid) * d.block > 1024 && d.block <= 1024) {
      EXPECT_NE(msg.find("host backend runs at most 1024 threads per launch"), std::string::npos)
          << msg;
    }
  }
  EXPECT_TRUE(backend_->stream_idle(stream()));
  sync();
  EXPECT_EQ(ran.load(), 0);

  // Exactly at the limits is fine.
  gnio::launch(stream(), {.grid = 1, .block = 1024, .shared_bytes = std::size_t{1} << 20}, kernel);
  sync();
  EXPECT_EQ(ran.load(), 1024);

  EXPECT_EQ(
      error_class_of([&] { gnio::detail::host_launch(nullptr, {.grid = 1, .block = 1}, [] {}); }),
      ErrorClass::InvalidArgument);
}

TEST(LaunchDims, CudaPathChecksOnlyWhatTheRuntimeCannot) {
  using gnio::detail::check_launch_dims;
  EXPECT_EQ(error_class_of([] { check_launch_dims({.grid = 0, .block = 1}, false); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([] { check_launch_dims({.grid = 1, .block = 1025}, false); }),
            ErrorClass::InvalidArgument);
  // Big grids and large shared memory are the GPU's business.
  EXPECT_NO_THROW(
      check_launch_dims({.grid = 100000, .block = 1024, .shared_bytes = 200000}, false));
  EXPECT_EQ(error_class_of([] { gnio::detail::throw_launch_error_not_cuda(); }),
            ErrorClass::Unsupported);
}

TEST_F(LaunchTest, MaxThreadsFollowsTheEnvironment) {
  ASSERT_EQ(setenv("GNIO_HOST_MAX_THREADS", "2048", 1), 0);
  std::atomic<int> ran{0};
  auto* r = &ran;
  gnio::launch(stream(), {.grid = 2, .block = 1024}, [r] {
    gnio::dev::sync_block();
    r->fetch_add(1);
  });
  sync();
  EXPECT_EQ(ran.load(), 2048);
  ASSERT_EQ(setenv("GNIO_HOST_MAX_THREADS", "64", 1), 0);
  EXPECT_EQ(error_class_of([&] { gnio::launch(stream(), {.grid = 1, .block = 65}, [] {}); }),
            ErrorClass::InvalidArgument);
  ASSERT_EQ(unsetenv("GNIO_HOST_MAX_THREADS"), 0);
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
// Sanitizers multiply the cost of every synchronisation (GCC 12's ThreadSanitizer by the number
// of live threads): fewer launches keep the test's time in line with the others, and the time is
// reported, not judged.
constexpr int kPerfLaunches = 100;
constexpr bool kJudgeTime = false;
#else
constexpr int kPerfLaunches = 1000;
constexpr bool kJudgeTime = true;
#endif

// The cost of a launch, and that the pool reuses its threads instead of growing. Measured on 2
// dedicated cores: ~1.1 ms per launch (TSan ~3 ms with GCC 13's runtime).
TEST_F(LaunchTest, ThousandLaunchesOf8x64AreFast) {
  constexpr int kLaunches = kPerfLaunches;
  std::atomic<std::uint64_t> sum{0};
  auto* s = &sum;
  auto kernel = [s] {
    namespace dev = gnio::dev;
    dev::sync_block();  // every launch really needs all its threads at once
    s->fetch_add(dev::global_thread() + 1, std::memory_order_relaxed);
  };
  gnio::launch(stream(), {.grid = 8, .block = 64}, kernel);  // warm the pool
  sync();
  const auto threads_before = gnio::platform::host::host_pool_stats().threads;
  sum = 0;

  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i) gnio::launch(stream(), {.grid = 8, .block = 64}, kernel);
  sync();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EXPECT_EQ(sum.load(), std::uint64_t{kLaunches} * (512 * 513 / 2));
  const auto stats = gnio::platform::host::host_pool_stats();
  // (It may shrink meanwhile: idle threads left by earlier tests retire.)
  EXPECT_LE(stats.threads, threads_before) << "the pool grew although launches reuse it";
  EXPECT_LE(stats.threads, stats.limit);
  std::printf(
      "[   perf   ] %d launches of 8 x 64 threads: %.3f s, %.1f us per launch "
      "(pool: %zu threads)\n",
      kLaunches, seconds, seconds * 1e6 / kLaunches, stats.threads);
  RecordProperty("us_per_launch", static_cast<int>(seconds * 1e6 / kLaunches));
  // Generous (60 ms per launch): CI cores are shared with other jobs. What this catches is a
  // launch costing a thread creation per kernel thread or a sleep, not a few percent.
  if (kJudgeTime) {
    EXPECT_LT(seconds / kLaunches, 0.060);
  }
}

// After a big launch the pool shrinks back: idle workers retire after a few seconds.
TEST_F(LaunchTest, IdleKernelThreadsRetire) {
  std::atomic<int> ran{0};
  auto* r = &ran;
  gnio::launch(stream(), {.grid = 4, .block = 256}, [r] { r->fetch_add(1); });
  sync();
  ASSERT_EQ(ran.load(), 1024);
  ASSERT_GE(gnio::platform::host::host_pool_stats().threads, 1024u);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::size_t threads = 0;
  while ((threads = gnio::platform::host::host_pool_stats().threads) > 64 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(threads, 64u) << "idle kernel threads did not retire";
  // And the pool grows again on demand.
  gnio::launch(stream(), {.grid = 2, .block = 128}, [r] { r->fetch_add(1); });
  sync();
  EXPECT_EQ(ran.load(), 1024 + 256);
}

}  // namespace
