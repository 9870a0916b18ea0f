// The proxy transport over tcp (GNIO_NET=tcp, host backend), run as 2 ranks on 2 simulated nodes
// (gnio-run --nodes 2), so every operation between them takes the cross-node path: put_signal
// ordering (the receiver checks data as soon as it sees the signal), quiet completion (data is
// at the target when quiet returns, with no other synchronisation), fence before a signal, and
// the receiver's validation of every frame (a descriptor outside the heap is rejected and nothing
// is written), a get and atomics after a put (they see it), a link cut in the middle of a put's
// data, and collectives across nodes. Failure scenarios run in their own
// process pairs (see CMakeLists.txt).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/gnio_test.hpp"
#if GNIO_NET_TEST_COLL
#include "gnio/coll.hpp"
#endif

namespace rma_net_test {

using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

constexpr int kRounds = 12;
// Odd region size and an odd start: neither the data nor the offsets are aligned.
constexpr std::size_t kRegion = 65537;
constexpr std::size_t kSkew = 3;

GNIO_KERNEL_TEST(Net, PeersAreReachedThroughTheProxy) {
  gnio::Comm& c = comm();
  ASSERT_EQ(c.nodes(), 2) << "run with gnio-run --nodes 2";
  DeviceComm dc = c.device_handle();
  EXPECT_EQ(dc.route(1 - c.rank()), gnio::Route::Proxy);
  EXPECT_EQ(dc.route(c.rank()), gnio::Route::P2P);
  EXPECT_FALSE(dc.is_p2p(1 - c.rank()));
}

/// Rank 0 put_signals region k then adds 1 to the signal, for every k, without waiting; rank 1
/// waits for signal >= k and checks region k at once, inside the kernel.
GNIO_KERNEL_TEST(Net, PutSignalDataVisibleWithSignal) {
  gnio::Comm& c = comm();
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(kSkew + kRegion * kRounds);
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kRegion * kRounds));
  auto* wrong = static_cast<std::uint64_t*>(c.alloc_device(sizeof(std::uint64_t)));
  std::vector<std::uint8_t> host(kRegion * kRounds);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = pattern_byte(0, i, 7);
  gnio_test::to_device(src, host.data(), host.size());
  std::vector<std::uint8_t> poison(kSkew + kRegion * kRounds, kPoison);
  gnio_test::to_device(c.local(dst), poison.data(), poison.size());
  std::uint64_t zero = 0;
  gnio_test::to_device(c.local(sig), &zero, 8);
  gnio_test::to_device(wrong, &zero, 8);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank();
  gnio::launch(stream(), {.grid = 1, .block = 32}, [=] GNIO_HD() {
    const gnio::Warp w{};
    for (int k = 0; k < kRounds; ++k) {
      if (me == 0) {
        dc.put_signal<gnio::Warp>(dst + kSkew + k * kRegion, src + k * kRegion, kRegion, sig, 1,
                                  SignalOp::Add, 1);
      } else {
        if (dc.wait_signal<gnio::Warp>(sig, Cmp::Ge, static_cast<std::uint64_t>(k + 1)) !=
            gnio::Status::Ok)
          return;
        std::uint64_t bad = 0;
        const std::uint8_t* got = dc.local(dst) + kSkew + k * kRegion;
        for (std::size_t i = w.rank(); i < kRegion; i += w.size())
          bad += got[i] != pattern_byte(0, k * kRegion + i, 7);
        gnio::dev::atomic_fetch_add(wrong, bad, gnio::dev::Order::Relaxed);
      }
    }
    dc.quiet();
  });
  c.synchronize(stream());
  std::uint64_t bad = 1;
  gnio_test::to_host(&bad, wrong, 8);
  EXPECT_EQ(bad, 0u);
  if (me == 1) {
    // The margins on either side stayed poisoned.
    std::vector<std::uint8_t> got(poison.size());
    gnio_test::to_host(got.data(), c.local(dst), got.size());
    for (std::size_t i = 0; i < kSkew; ++i) EXPECT_EQ(got[i], kPoison);
  }
  c.bootstrap().barrier();
  c.free_device(wrong);
  c.free_device(src);
  c.free(sig);
  c.free(dst);
}

/// Rank 0 put_nbis pieces of many sizes to rank 1, then quiet(); the host then only meets rank 1
/// through the bootstrap: no device signal orders the data, quiet alone must have completed it.
GNIO_KERNEL_TEST(Net, QuietCompletesEveryPut) {
  gnio::Comm& c = comm();
  const std::size_t sizes[] = {1, 2, 3, 8, 13, 255, 4096, 65537, (1u << 20) + 5};
  std::size_t total = 0;
  for (std::size_t s : sizes) total += s + 1;  // +1: every piece starts unaligned
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(total + 64);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(total + 64));
  std::vector<std::uint8_t> host(total + 64);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = pattern_byte(c.rank(), i, 3);
  gnio_test::to_device(src, host.data(), host.size());
  std::vector<std::uint8_t> poison(total + 64, kPoison);
  gnio_test::to_device(c.local(dst), poison.data(), poison.size());
  c.bootstrap().barrier();
  if (c.rank() == 0) {
    DeviceComm dc = c.device_handle();
    gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
      std::size_t at = 1;
      for (std::size_t s : sizes) {
        dc.put_nbi(dst + at, src + at, s, 1);
        at += s + 1;
      }
      dc.quiet();
    });
    c.synchronize(stream());
  }
  c.bootstrap().barrier();
  if (c.rank() == 1) {
    std::vector<std::uint8_t> got(total + 64), expected(total + 64, kPoison);
    gnio_test::to_host(got.data(), c.local(dst), got.size());
    std::size_t at = 1;
    for (std::size_t s : sizes) {
      for (std::size_t i = at; i < at + s; ++i) expected[i] = pattern_byte(0, i, 3);
      at += s + 1;
    }
    EXPECT_EQ(gnio_test::count_wrong(got, expected, "put_nbi + quiet"), 0u);
  }
  c.bootstrap().barrier();
  c.free_device(src);
  c.free(dst);
}

/// The proxy's descriptor thread sleeps when idle (on the host backend until device code rings
/// its doorbell, with a 50 ms sleep as the backstop; on GPUs for up to 200 us). After an idle
/// spell longer than that backstop, a put + quiet to the other node must complete at once, not
/// when the proxy next looks by itself: rank 0 times 15 such rounds (launch to synchronize), the
/// data of each checked at rank 1. Heard, the median was 0.2-0.3 ms on a quiet machine and 8-9.4
/// ms with both cores compiling; with the doorbell unheard it was 40-90 ms (the proxy sleeps
/// again right after each put, so rounds without the idle spell cannot serve as a baseline).
GNIO_KERNEL_TEST(Net, PostAfterIdleWakesTheProxy) {
  gnio::Comm& c = comm();
  constexpr int kIdleRounds = 15;
  SymPtr<std::uint64_t> dst = c.alloc<std::uint64_t>(kIdleRounds);
  auto* src = static_cast<std::uint64_t*>(c.alloc_device(kIdleRounds * sizeof(std::uint64_t)));
  std::vector<std::uint64_t> host(kIdleRounds), poison(kIdleRounds, ~std::uint64_t{0});
  for (int k = 0; k < kIdleRounds; ++k) host[k] = 0x1000u + static_cast<std::uint64_t>(k) * 7;
  gnio_test::to_device(src, host.data(), host.size() * sizeof(std::uint64_t));
  gnio_test::to_device(c.local(dst), poison.data(), poison.size() * sizeof(std::uint64_t));
  DeviceComm dc = c.device_handle();
  std::vector<double> ms;
  for (int k = 0; k < kIdleRounds; ++k) {
    c.bootstrap().barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past the proxy's backstop
    if (c.rank() != 0) continue;
    const auto t0 = std::chrono::steady_clock::now();
    gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
      dc.put(dst + k, src + k, sizeof(std::uint64_t), 1);
      dc.quiet();
    });
    c.synchronize(stream());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  c.bootstrap().barrier();
  if (c.rank() == 0) {
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("put + quiet after 60 ms idle: median %.3f ms, min %.3f, max %.3f\n", median,
                ms.front(), ms.back());
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    // A timing bar: under a sanitizer, beside another test on the 2-core CI machine, one run in
    // CI read 206 ms (0.5 ms alone in the same ASan build), so there only the data is checked.
    EXPECT_LT(median, 15.0) << "the proxy did not wake for descriptors posted after an idle spell";
#endif
  } else {
    std::vector<std::uint64_t> got(kIdleRounds);
    gnio_test::to_host(got.data(), c.local(dst), got.size() * sizeof(std::uint64_t));
    EXPECT_EQ(got, host);
  }
  c.bootstrap().barrier();
  c.free_device(src);
  c.free(dst);
}

/// A kernel that ends with a large put_nbi still in the proxy's hands (no quiet), then free() on
/// both ranks: free() must let the put land first, or it lands in the next allocation at that
/// address. Rank 1 poisons the new allocation's last 64 KiB (what a late put writes last) and
/// checks that nothing wrote there.
GNIO_KERNEL_TEST(Net, FreeLetsOperationsInFlightLand) {
  gnio::Comm& c = comm();
  constexpr std::size_t kBytes = 16u << 20;
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(kBytes);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kBytes));
  std::vector<std::uint8_t> host(kBytes);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = pattern_byte(0, i, 5);
  gnio_test::to_device(src, host.data(), host.size());
  c.bootstrap().barrier();
  if (c.rank() == 0) {
    DeviceComm dc = c.device_handle();
    gnio::launch(stream(), {.grid = 1, .block = 1},
                 [=] GNIO_HD() { dc.put_nbi(dst, src, kBytes, 1); });
    c.synchronize(stream());
  }
  const std::uint64_t first_offset = dst.offset;
  c.free(dst);
  SymPtr<std::uint8_t> next = c.alloc<std::uint8_t>(kBytes);
  EXPECT_EQ(next.offset, first_offset) << "the test needs the same address handed out again";
  constexpr std::size_t kTail = 64u << 10;
  std::vector<std::uint8_t> poison(kTail, kPoison);
  if (c.rank() == 1) gnio_test::to_device(c.local(next) + kBytes - kTail, poison.data(), kTail);
  c.bootstrap().barrier();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (c.rank() == 1) {
    std::vector<std::uint8_t> got(kTail);
    gnio_test::to_host(got.data(), c.local(next) + kBytes - kTail, kTail);
    EXPECT_EQ(gnio_test::count_wrong(got, poison, "the allocation after free"), 0u);
  }
  c.bootstrap().barrier();
  c.free_device(src);
  c.free(next);
}

/// put_nbi, fence, signal: the receiver that sees the signal sees the data.
GNIO_KERNEL_TEST(Net, FenceOrdersPutBeforeSignal) {
  gnio::Comm& c = comm();
  constexpr std::size_t kBytes = 300001;
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(kBytes);
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kBytes));
  auto* wrong = static_cast<std::uint64_t*>(c.alloc_device(8));
  std::vector<std::uint8_t> host(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) host[i] = pattern_byte(c.rank(), i, 11);
  gnio_test::to_device(src, host.data(), kBytes);
  std::vector<std::uint8_t> poison(kBytes, kPoison);
  gnio_test::to_device(c.local(dst), poison.data(), kBytes);
  std::uint64_t zero = 0;
  gnio_test::to_device(c.local(sig), &zero, 8);
  gnio_test::to_device(wrong, &zero, 8);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank(), peer = 1 - me;
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    dc.put_nbi(dst, src, kBytes, peer);
    dc.fence(peer);
    dc.signal(sig, 42, SignalOp::Set, peer);
    if (dc.wait_signal(sig, Cmp::Eq, 42) != gnio::Status::Ok) return;
    std::uint64_t bad = 0;
    for (std::size_t i = 0; i < kBytes; ++i) bad += dc.local(dst)[i] != pattern_byte(peer, i, 11);
    *wrong = bad;
    (void)dc.barrier(dc.world());
  });
  c.synchronize(stream());
  std::uint64_t bad = 1;
  gnio_test::to_host(&bad, wrong, 8);
  EXPECT_EQ(bad, 0u);
  c.bootstrap().barrier();
  c.free_device(wrong);
  c.free_device(src);
  c.free(sig);
  c.free(dst);
}

// ---- failure scenarios (each in its own process pair) ----------------------------------------

/// A descriptor whose range runs past the end of the target's heap (the sender's own check
/// bypassed by posting to the ring directly) is rejected by the receiver: nothing is written,
/// the connection closes, both communicators report RemoteError.
/// A put large enough to be split over the connections past the first (GNIO_NET_STRIPE_MIN, 4M)
/// keeps its place among the operations to its peer: a fenced smaller put over part of it lands
/// after it, a striped put_signal's signal comes after all of its pieces, and a get after quiet()
/// reads everything the striped puts wrote.
GNIO_KERNEL_TEST(Net, StripedPutsKeepTheirOrder) {
  gnio::Comm& c = comm();
  constexpr std::size_t kBytes = (12u << 20) + 4097;  // above the default stripe size, odd
  constexpr std::size_t kPatch = 5000, kPatchAt = (3u << 20) + 3;
  SymPtr<std::uint8_t> a = c.alloc<std::uint8_t>(kBytes);
  SymPtr<std::uint8_t> b = c.alloc<std::uint8_t>(kBytes);
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kBytes));
  auto* patch = static_cast<std::uint8_t*>(c.alloc_device(kPatch));
  auto* back = static_cast<std::uint8_t*>(c.alloc_device(kBytes));
  auto* wrong = static_cast<std::uint64_t*>(c.alloc_device(3 * 8));
  std::vector<std::uint8_t> host(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) host[i] = pattern_byte(c.rank(), i, 21);
  gnio_test::to_device(src, host.data(), kBytes);
  for (std::size_t i = 0; i < kPatch; ++i) host[i] = pattern_byte(c.rank(), i, 22);
  gnio_test::to_device(patch, host.data(), kPatch);
  std::vector<std::uint8_t> poison(kBytes, kPoison);
  gnio_test::to_device(c.local(a), poison.data(), kBytes);
  gnio_test::to_device(c.local(b), poison.data(), kBytes);
  gnio_test::to_device(back, poison.data(), kBytes);
  const std::uint64_t zeros[3] = {0, 0, 0};
  gnio_test::to_device(c.local(sig), zeros, 8);
  gnio_test::to_device(wrong, zeros, 3 * 8);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank(), peer = 1 - me;
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    dc.put_nbi(a, src, kBytes, peer);
    dc.fence(peer);
    dc.put_nbi(a + static_cast<std::ptrdiff_t>(kPatchAt), patch, kPatch, peer);
    dc.put_signal(b, src, kBytes, sig, 7, SignalOp::Set, peer);
    dc.quiet();
    // Everything this rank wrote into the peer's `a` is in place: read it back.
    dc.get(back, a, kBytes, peer);
    std::uint64_t bad_back = 0;
    for (std::size_t i = 0; i < kBytes; ++i) {
      const bool patched = i >= kPatchAt && i < kPatchAt + kPatch;
      bad_back +=
          back[i] != (patched ? pattern_byte(me, i - kPatchAt, 22) : pattern_byte(me, i, 21));
    }
    wrong[0] = bad_back;
    // The peer's put_signal into this rank's `b`: all of it once its signal is seen.
    if (dc.wait_signal(sig, Cmp::Eq, 7) != gnio::Status::Ok) return;
    std::uint64_t bad_b = 0;
    for (std::size_t i = 0; i < kBytes; ++i) bad_b += dc.local(b)[i] != pattern_byte(peer, i, 21);
    wrong[1] = bad_b;
    (void)dc.barrier(dc.world());
    // And the peer's writes into this rank's `a`, in their order.
    std::uint64_t bad_a = 0;
    for (std::size_t i = 0; i < kBytes; ++i) {
      const bool patched = i >= kPatchAt && i < kPatchAt + kPatch;
      bad_a += dc.local(a)[i] !=
               (patched ? pattern_byte(peer, i - kPatchAt, 22) : pattern_byte(peer, i, 21));
    }
    wrong[2] = bad_a;
  });
  c.synchronize(stream());
  std::uint64_t bad[3] = {1, 1, 1};
  gnio_test::to_host(bad, wrong, 3 * 8);
  EXPECT_EQ(bad[0], 0u) << "get after quiet";
  EXPECT_EQ(bad[1], 0u) << "put_signal's data when its signal is seen";
  EXPECT_EQ(bad[2], 0u) << "fenced put after a striped one";
  c.bootstrap().barrier();
  c.free_device(wrong);
  c.free_device(back);
  c.free_device(patch);
  c.free_device(src);
  c.free(sig);
  c.free(b);
  c.free(a);
}

/// A word of the pattern a rank puts in round `round` (0 for the backlog) at word `i`: never the
/// poison, different for every rank, round and word.
constexpr std::uint64_t round_word(int rank, int round, std::size_t i) {
  return (std::uint64_t(rank + 1) << 56) | (std::uint64_t(round + 1) << 40) | i;
}

/// Striped puts in flight together (the proxy takes the next before the last one's pieces are in
/// place) keep what the device API promises: each round, a large put into `z` (a backlog on every
/// lane), a large put into `a`, one over part of it (same bytes: lands after it), fence(), then a
/// large put into `b`. The receiver waits for `b`'s first word of the round and at once reads
/// `a`: both puts before the fence are in place (their pieces travel on other lanes than the
/// word it waits for, so a fence the proxy ignored shows here, though not in every run).
/// Sampled: two words of every 4 KiB (a missing piece is megabytes).
GNIO_KERNEL_TEST(Net, PipelinedStripedPutsKeepFenceOrder) {
#if defined(GNIO_TSAN)
  // Reading data while a later put may still be landing on it is the point here, and a race by
  // ThreadSanitizer's rules: what orders it runs through the other process.
  GTEST_SKIP() << "polls put data as it lands (ThreadSanitizer build)";
#endif
  gnio::Comm& c = comm();
  constexpr int kRoundsHere = 4;
  constexpr std::size_t kZ = (16u << 20) / 8, kA = (8u << 20) / 8, kB = ((4u << 20) + 4096) / 8;
  constexpr std::size_t kCAt = (3u << 20) / 8, kC = ((4u << 20) + 4096) / 8;  // inside a
  constexpr std::size_t kPage = 4096 / 8;
  SymPtr<std::uint64_t> z = c.alloc<std::uint64_t>(kZ);
  SymPtr<std::uint64_t> a = c.alloc<std::uint64_t>(kA);
  SymPtr<std::uint64_t> b = c.alloc<std::uint64_t>(kB);
  const int me = c.rank(), peer = 1 - me;
  // Sources: the backlog, then per round a, c, b.
  constexpr std::size_t kPerRound = kA + kC + kB;
  auto* src = static_cast<std::uint64_t*>(c.alloc_device((kZ + kPerRound * kRoundsHere) * 8));
  auto* wrong = static_cast<std::uint64_t*>(c.alloc_device(8));
  {
    std::vector<std::uint64_t> host(kZ + kPerRound * kRoundsHere);
    for (std::size_t i = 0; i < kZ; ++i) host[i] = round_word(me, -1, i);
    for (int r = 0; r < kRoundsHere; ++r) {
      std::uint64_t* round = host.data() + kZ + kPerRound * r;
      for (std::size_t i = 0; i < kA; ++i) round[i] = round_word(me, 3 * r, i);
      for (std::size_t i = 0; i < kC; ++i) round[kA + i] = round_word(me, 3 * r + 1, i);
      for (std::size_t i = 0; i < kB; ++i) round[kA + kC + i] = round_word(me, 3 * r + 2, i);
    }
    gnio_test::to_device(src, host.data(), host.size() * 8);
    std::vector<std::uint64_t> poison(kZ, ~std::uint64_t{0});
    gnio_test::to_device(c.local(z), poison.data(), kZ * 8);
    gnio_test::to_device(c.local(a), poison.data(), kA * 8);
    gnio_test::to_device(c.local(b), poison.data(), kB * 8);
    const std::uint64_t zero = 0;
    gnio_test::to_device(wrong, &zero, 8);
  }
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    std::uint64_t bad = 0;
    for (int r = 0; r < kRoundsHere; ++r) {
      const std::uint64_t* round = src + kZ + kPerRound * r;
      dc.put_nbi(z, src, kZ, peer);
      dc.put_nbi(a, round, kA, peer);
      dc.put_nbi(a + static_cast<std::ptrdiff_t>(kCAt), round + kA, kC, peer);
      dc.fence(peer);
      dc.put_nbi(b, round + kA + kC, kB, peer);
      // The peer's b of this round has begun to land: its a is whole.
      if (dc.wait_signal(b, Cmp::Eq, round_word(peer, 3 * r + 2, 0)) != gnio::Status::Ok) return;
      const std::uint64_t* got = dc.local(a);
      for (std::size_t p = 0; p < kA; p += kPage) {
        for (std::size_t i : {p, p + kPage - 1}) {
          const bool over = i >= kCAt && i < kCAt + kC;
          const std::uint64_t want =
              over ? round_word(peer, 3 * r + 1, i - kCAt) : round_word(peer, 3 * r, i);
          bad += got[i] != want;
        }
      }
      dc.quiet();
      if (dc.barrier(dc.world()) != gnio::Status::Ok) return;
    }
    // After quiet and a barrier, everything is in place.
    for (std::size_t p = 0; p < kZ; p += kPage) bad += dc.local(z)[p] != round_word(peer, -1, p);
    for (std::size_t p = 0; p < kB; p += kPage)
      bad += dc.local(b)[p] != round_word(peer, 3 * kRoundsHere - 1, p);
    *wrong = bad;
  });
  c.synchronize(stream());
  std::uint64_t bad = 1;
  gnio_test::to_host(&bad, wrong, 8);
  EXPECT_EQ(bad, 0u);
  c.bootstrap().barrier();
  c.free_device(wrong);
  c.free_device(src);
  c.free(b);
  c.free(a);
  c.free(z);
}

/// How communicator creation that must fail failed: the error's class and text, and how long it
/// took (seconds). Adds a failure when creation succeeds.
struct CreationFailure {
  gnio::ErrorClass cls = gnio::ErrorClass::Internal;
  std::string msg;
  double took = 0;
};
CreationFailure create_expecting_failure() {
  const auto start = std::chrono::steady_clock::now();
  CreationFailure f;
  try {
    gnio::Comm c = gnio::Comm::from_env();
    ADD_FAILURE() << "communicator creation succeeded";
  } catch (const gnio::Error& e) {
    f.msg = e.what();
    f.cls = e.error_class();
  }
  f.took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return f;
}

// GNIO_NET=ucx: a rank whose UCX cannot start (rank 1 asks for a UCX transport that does not
// exist) fails communicator creation, and every other rank fails with it, naming that rank, at
// once: nobody waits for an address that never comes. Runs alone in its process (the shared
// communicator is never made).
GNIO_KERNEL_TEST(NetFault, UcxStartFailureReachesEveryRank) {
  const char* net = std::getenv("GNIO_NET");
  if (!net || std::strcmp(net, "ucx") != 0) GTEST_SKIP() << "the ucx backend's test";
  const char* rank = std::getenv("RANK");
  ASSERT_NE(rank, nullptr) << "run under gnio-run";
  if (std::strcmp(rank, "1") == 0) setenv("UCX_TLS", "no_such_transport", 1);
  const auto [cls, msg, took] = create_expecting_failure();
  EXPECT_EQ(cls, gnio::ErrorClass::SystemError) << msg;
  EXPECT_NE(msg.find("ucp_init failed"), std::string::npos) << msg;
  if (std::strcmp(rank, "1") != 0) {
    EXPECT_NE(msg.find("failed on rank 1"), std::string::npos) << msg;
  }
  EXPECT_LT(took, 10.0) << msg;
}

/// Whether this test process runs on the host backend (GNIO_BACKEND=host, as ctest sets it).
bool on_host_backend() {
  const char* backend = std::getenv("GNIO_BACKEND");
  return backend != nullptr && std::strcmp(backend, "host") == 0;
}

// GNIO_NET=ucx: whether the heap is registered with UCX or its data staged through messages must
// be the same on every rank (rank 1 here stages, rank 0 does not): communicator creation fails
// on every rank with InvalidArgument naming both, at once. Runs alone in its process.
GNIO_KERNEL_TEST(NetFault, StagingMismatchIsRefused) {
  const char* net = std::getenv("GNIO_NET");
  if (!net || std::strcmp(net, "ucx") != 0) GTEST_SKIP() << "the ucx backend's test";
  const char* rank = std::getenv("RANK");
  ASSERT_NE(rank, nullptr) << "run under gnio-run";
  if (!on_host_backend())
    GTEST_SKIP() << "the host backend's test (on GPUs the choice depends on UCX's CUDA support)";
  setenv("GNIO_PROXY_STAGING", std::strcmp(rank, "1") == 0 ? "always" : "auto", 1);
  const auto [cls, msg, took] = create_expecting_failure();
  EXPECT_EQ(cls, gnio::ErrorClass::InvalidArgument) << msg;
  EXPECT_NE(msg.find("rank 1 stages heap data through host memory and rank 0 does not"),
            std::string::npos)
      << msg;
  EXPECT_LT(took, 10.0) << msg;
}

// GNIO_NET=tcp: every pair must open the same number of connections. Rank 1 asks for 3, rank 0
// takes the default (0: picked by backend, 4 or 8, never 3): creation fails on both ranks with
// InvalidArgument naming both counts, at once. Runs alone in its process.
GNIO_KERNEL_TEST(NetFault, LaneCountMismatchIsRefused) {
  const char* rank = std::getenv("RANK");
  ASSERT_NE(rank, nullptr) << "run under gnio-run";
  if (std::strcmp(rank, "1") == 0)
    setenv("GNIO_NET_NSOCKS", "3", 1);
  else
    unsetenv("GNIO_NET_NSOCKS");
  const auto [cls, msg, took] = create_expecting_failure();
  EXPECT_EQ(cls, gnio::ErrorClass::InvalidArgument) << msg;
  EXPECT_NE(msg.find("GNIO_NET_NSOCKS is"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strcmp(rank, "1") == 0 ? "is 3 here" : "but 3 on rank 1"),
            std::string::npos)
      << msg;
  EXPECT_LT(took, 10.0) << msg;
}

// GNIO_NET_NSOCKS=0 is the default by name: on the host backend (4) it agrees with a rank that
// asks for 4. (Before 0 meant the default, it failed creation as out of range.) Runs alone in
// its process.
GNIO_KERNEL_TEST(NetFault, LaneCountZeroIsTheDefault) {
  const char* rank = std::getenv("RANK");
  ASSERT_NE(rank, nullptr) << "run under gnio-run";
  if (!on_host_backend()) GTEST_SKIP() << "the host backend's test (on GPUs the default is 8)";
  setenv("GNIO_NET_NSOCKS", std::strcmp(rank, "1") == 0 ? "4" : "0", 1);
  try {
    gnio::Comm c = gnio::Comm::from_env();
    EXPECT_EQ(c.nodes(), 2);
  } catch (const gnio::Error& e) {
    ADD_FAILURE() << "creation failed: " << e.what();
  }
}

// A connection count outside 0..16 fails creation with InvalidArgument naming the variable and
// what it may be (every rank asks for 17 here, so none waits for another).
GNIO_KERNEL_TEST(NetFault, LaneCountOutOfRangeIsRefused) {
  setenv("GNIO_NET_NSOCKS", "17", 1);
  const auto [cls, msg, took] = create_expecting_failure();
  EXPECT_EQ(cls, gnio::ErrorClass::InvalidArgument) << msg;
  EXPECT_NE(msg.find("GNIO_NET_NSOCKS=17 is not 0 (auto) or in [1, 16]"), std::string::npos) << msg;
  EXPECT_LT(took, 10.0) << msg;
}

GNIO_KERNEL_TEST(NetFault, ReceiverRejectsOutOfHeapWrite) {
  gnio::Comm& c = comm();
  DeviceComm dc = c.device_handle();
  const gnio::detail::DeviceCommState& state = gnio::detail::DeviceCommPort::state(dc);
  const std::uint64_t heap = state.heap_bytes_;
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(64));
  std::vector<std::uint8_t> host(64);
  for (std::size_t i = 0; i < 64; ++i) host[i] = pattern_byte(0, i, 5);
  gnio_test::to_device(src, host.data(), 64);
  // The last 60 bytes of the heap are inside it; the write would cover them and 4 bytes beyond.
  std::uint8_t* tail =
      static_cast<std::uint8_t*>(c.local_address(SymPtr<char>{state.heap_id_, 0, heap - 60}));
  std::vector<std::uint8_t> poison(60, kPoison);
  gnio_test::to_device(tail, poison.data(), 60);
  c.bootstrap().barrier();
  std::string msg;
  if (c.rank() == 0) {
    gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
      gnio::ProxyDesc d =
          gnio::detail::proxy_desc(gnio::ProxyOp::Put, 1, src, heap - 60, 64, 0, 0, SignalOp::Set);
      (void)gnio::detail::DeviceCommPort::proxy_post(dc, d, false, "test", {});
      dc.quiet();
    });
    try {
      c.synchronize(stream());
      ADD_FAILURE() << "expected RemoteError on the sender";
    } catch (const gnio::Error& e) {
      EXPECT_EQ(e.error_class(), gnio::ErrorClass::RemoteError) << e.what();
      msg = e.what();
    }
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  } else {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (msg.empty() && std::chrono::steady_clock::now() < until) {
      try {
        c.check();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } catch (const gnio::Error& e) {
        EXPECT_EQ(e.error_class(), gnio::ErrorClass::RemoteError) << e.what();
        msg = e.what();
      }
    }
    EXPECT_NE(msg.find("rejected"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing was written"), std::string::npos) << msg;
    // A plain read: the stream helpers would rethrow the communicator's error, and on the host
    // backend (the only one the tcp transport runs on yet) the heap is host memory.
    std::vector<std::uint8_t> got(tail, tail + 60);
    EXPECT_EQ(got, poison);
  }
  EXPECT_TRUE(c.aborted());
  c.bootstrap().barrier();
  c.free_device(src);
}

/// The link breaks in the middle of a put's data (GNIO_NET_CUT_AFTER=1M, set by CMakeLists.txt):
/// the sender's quiet and the receiver's wait for the signal both end with RemoteError well
/// within the deadline, and the signal of the half-delivered put_signal is never set.
GNIO_KERNEL_TEST(NetFault, LinkCutMidTransfer) {
  constexpr std::size_t kBytes = 4u << 20;  // past the 1 MiB cut
  gnio::Comm& c = comm();
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(kBytes);
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kBytes));
  std::vector<std::uint8_t> host(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) host[i] = pattern_byte(0, i, 9);
  gnio_test::to_device(src, host.data(), kBytes);
  std::uint64_t zero = 0;
  gnio_test::to_device(c.local(sig), &zero, 8);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank();
  const auto start = std::chrono::steady_clock::now();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    if (me == 0) {
      dc.put_signal(dst, src, kBytes, sig, 1, SignalOp::Set, 1);
      dc.quiet();
    } else {
      (void)dc.wait_signal(sig, Cmp::Eq, 1);
    }
  });
  std::string msg;
  try {
    c.synchronize(stream());
    ADD_FAILURE() << "expected RemoteError on rank " << me;
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::RemoteError) << e.what();
    msg = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 8.0) << "GNIO_TIMEOUT is 10 s: the cut must be noticed, not timed out";
  if (me == 0) {
    EXPECT_NE(msg.find("cut"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
    // A plain read (host backend): the put_signal was not applied, so its signal is unset.
    EXPECT_EQ(*c.local(sig), 0u);
  }
  EXPECT_TRUE(c.aborted());
  c.bootstrap().barrier();
  c.free_device(src);
}

/// A get after a put to the same peer, from the same thread, reads what the put wrote (one ring
/// drained in order, one connection, the target applies in order); atomics through the proxy
/// return the old values and are applied once each.
GNIO_KERNEL_TEST(Net, GetAndAtomicsAfterPutSeeIt) {
  gnio::Comm& c = comm();
  const int peer = 1 - c.rank();
  SymPtr<std::uint8_t> buf = c.alloc<std::uint8_t>(kRegion);
  SymPtr<std::uint64_t> word = c.alloc<std::uint64_t>(1);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kRegion));
  auto* back = static_cast<std::uint8_t*>(c.alloc_device(kRegion));
  auto* olds = static_cast<std::uint64_t*>(c.alloc_device(3 * sizeof(std::uint64_t)));
  std::vector<std::uint8_t> host(kRegion), poison(kRegion, kPoison);
  for (std::size_t i = 0; i < kRegion; ++i) host[i] = pattern_byte(c.rank(), i, 7);
  gnio_test::to_device(src, host.data(), kRegion);
  gnio_test::to_device(back, poison.data(), kRegion);
  gnio_test::to_device(c.local(buf), poison.data(), kRegion);
  const std::uint64_t start = 1000;
  gnio_test::to_device(c.local(word), &start, sizeof(start));
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    dc.put_nbi(buf + kSkew, src + kSkew, kRegion - kSkew, peer);
    dc.get(back + kSkew, buf + kSkew, kRegion - kSkew, peer);
    olds[0] = dc.atomic_fetch_add(word, std::uint64_t{5}, peer);
    olds[1] = dc.atomic_compare_swap(word, std::uint64_t{1005}, std::uint64_t{77}, peer);
    dc.atomic_add(word, std::uint64_t{3}, peer);
    olds[2] = dc.atomic_fetch(word, peer);
    (void)dc.barrier(dc.world());
  });
  c.synchronize(stream());
  std::vector<std::uint8_t> got(kRegion), expected(kRegion, kPoison);
  gnio_test::to_host(got.data(), back, kRegion);
  for (std::size_t i = kSkew; i < kRegion; ++i) expected[i] = pattern_byte(c.rank(), i, 7);
  EXPECT_EQ(gnio_test::count_wrong(got, expected, "get after put"), 0u);
  std::uint64_t o[3];
  gnio_test::to_host(o, olds, sizeof(o));
  EXPECT_EQ(o[0], 1000u);
  EXPECT_EQ(o[1], 1005u);
  EXPECT_EQ(o[2], 80u);  // 77 + 3
  c.bootstrap().barrier();
  c.free_device(olds);
  c.free_device(back);
  c.free_device(src);
  c.free(word);
  c.free(buf);
}

/// Gets and atomics both ways while large puts cross (what MoE dispatch does): on each rank one
/// thread puts kCrossPut bytes to the peer kCrossRounds times without waiting, while another
/// thread of the same kernel issues gets and atomic adds on the peer without waiting either, so
/// requests and puts follow each other on the connection that carries requests and replies (with
/// GNIO_NET_NSOCKS=1, every operation). Neither proxy may stop reading its socket while it owes a
/// reply: its own sender is inside a put that only the peer's reading lets finish, and the peer is
/// in the same state. Every got byte, the added words and the last put's data are checked (a
/// fence orders the rounds; with GNIO_NET_NSOCKS > 1 some rounds go striped over the other
/// connections and some, while a get is open, on the first).
constexpr std::size_t kCrossPut = std::size_t{16} << 20;
constexpr int kCrossRounds = 8;
constexpr int kCrossRequests = 64;
constexpr std::size_t kProbe = 8;

GNIO_KERNEL_TEST(Net, RequestsBothWaysWhilePutsCross) {
  gnio::Comm& c = comm();
  const int peer = 1 - c.rank();
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(kCrossPut);
  SymPtr<std::uint8_t> probe = c.alloc<std::uint8_t>(kProbe);
  SymPtr<std::uint64_t> word = c.alloc<std::uint64_t>(1);
  const std::size_t src_bytes = kCrossPut + kCrossRounds;
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(src_bytes));
  auto* got = static_cast<std::uint8_t*>(c.alloc_device(kProbe * kCrossRequests));
  std::vector<std::uint8_t> host(src_bytes), poison(kCrossPut, kPoison), probe_bytes(kProbe);
  for (std::size_t i = 0; i < src_bytes; ++i) host[i] = pattern_byte(c.rank(), i, 11);
  for (std::size_t i = 0; i < kProbe; ++i) probe_bytes[i] = pattern_byte(c.rank(), i, 13);
  gnio_test::to_device(src, host.data(), src_bytes);
  gnio_test::to_device(c.local(dst), poison.data(), kCrossPut);
  gnio_test::to_device(c.local(probe), probe_bytes.data(), kProbe);
  gnio_test::to_device(got, poison.data(), kProbe * kCrossRequests);
  const std::uint64_t start = 5000;
  gnio_test::to_device(c.local(word), &start, sizeof(start));
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  // Two warps: thread 0 puts, thread 32 asks, both paced so that their operations interleave in
  // the proxy's queue (a put every 2 ms, a request pair every 0.25 ms); then the block meets and
  // thread 0 ends the epoch.
  gnio::launch(stream(), {.grid = 1, .block = 64}, [=] GNIO_HD() {
    const unsigned t = gnio::dev::thread();
    auto pause_ns = [](std::uint64_t ns) {
      const std::uint64_t t0 = gnio::dev::now_ns();
      while (gnio::dev::now_ns() - t0 < ns) {
      }
    };
    if (t == 0) {
      for (int r = 0; r < kCrossRounds; ++r) {
        dc.put_nbi(dst, src + r, kCrossPut, peer);
        dc.fence(peer);  // the rounds land in order (the last one's data is checked)
        pause_ns(2000000);
      }
      (void)dc.quiet();
    } else if (t == 32) {
      for (int k = 0; k < kCrossRequests; ++k) {
        dc.get_nbi(got + k * kProbe, probe, kProbe, peer);
        dc.atomic_add(word, std::uint64_t{1}, peer);
        pause_ns(250000);
      }
      (void)dc.quiet();
    }
    gnio::dev::sync_block();
    if (t == 0) (void)dc.barrier(dc.world());
  });
  c.synchronize(stream());
  std::vector<std::uint8_t> landed(kCrossPut), expected(kCrossPut);
  gnio_test::to_host(landed.data(), c.local(dst), kCrossPut);
  for (std::size_t i = 0; i < kCrossPut; ++i)
    expected[i] = pattern_byte(peer, i + kCrossRounds - 1, 11);
  EXPECT_EQ(gnio_test::count_wrong(landed, expected, "the last put"), 0u);
  std::vector<std::uint8_t> gets(kProbe * kCrossRequests), gets_expected(kProbe * kCrossRequests);
  gnio_test::to_host(gets.data(), got, gets.size());
  for (std::size_t i = 0; i < gets.size(); ++i)
    gets_expected[i] = pattern_byte(peer, i % kProbe, 13);
  EXPECT_EQ(gnio_test::count_wrong(gets, gets_expected, "gets"), 0u);
  std::uint64_t added = 0;
  gnio_test::to_host(&added, c.local(word), sizeof(added));
  EXPECT_EQ(added, start + kCrossRequests) << "the peer's atomic adds";
  c.bootstrap().barrier();
  c.free_device(got);
  c.free_device(src);
  c.free(word);
  c.free(probe);
  c.free(dst);
}

/// After rank 0's request drew a forged reply: rank 0's synchronize throws RemoteError whose text
/// holds `refusal`; every rank (rank 1 from the closed connection or the ucx transport's last
/// message) sees the communicator aborted well before GNIO_TIMEOUT (10 s). Ends at a barrier.
void expect_reply_refused(gnio::Comm& c, std::chrono::steady_clock::time_point start,
                          const char* refusal) {
  std::string msg;
  try {
    c.synchronize(stream());
    if (c.rank() == 0) ADD_FAILURE() << "expected RemoteError on rank 0";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::RemoteError) << e.what();
    msg = e.what();
  }
  if (c.rank() == 0) {
    EXPECT_NE(msg.find(refusal), std::string::npos) << msg;
  }
  const auto deadline = start + std::chrono::seconds(8);
  while (!c.aborted() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(c.aborted()) << "GNIO_TIMEOUT is 10 s: the rejection must be noticed, not timed out";
  c.bootstrap().barrier();
}

/// Replies that answer no request (GNIO_NET_BAD_REPLY=1, set by CMakeLists.txt: every reply names
/// a ticket the asker never used): the asker rejects them before writing a byte, and both ranks
/// get RemoteError at once, not at the deadline.
GNIO_KERNEL_TEST(NetFault, ReplyToNoRequestIsRejected) {
  gnio::Comm& c = comm();
  SymPtr<std::uint8_t> buf = c.alloc<std::uint8_t>(256);
  auto* dst = static_cast<std::uint8_t*>(c.alloc_device(256));
  std::vector<std::uint8_t> poison(256, kPoison), bytes(256, 0x11);
  gnio_test::to_device(dst, poison.data(), 256);
  gnio_test::to_device(c.local(buf), bytes.data(), 256);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank();
  const auto start = std::chrono::steady_clock::now();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    if (me == 0) dc.get(dst, buf, 256, 1);
  });
  expect_reply_refused(c, start, "answers no open get");
  if (me == 0) {
    // A plain read (host backend; copies through the aborted communicator would throw).
    std::vector<std::uint8_t> got(dst, dst + 256);
    EXPECT_EQ(got, poison) << "nothing of the rejected reply may be written";
  }
  c.free_device(dst);
  c.free(buf);
}

// The same for the answer to a remote atomic (tcp: an atomic reply; ucx with
// GNIO_UCX_WORD_OPS=am: the answer to a word message): refused, and both ranks abort in time.
GNIO_KERNEL_TEST(NetFault, AtomicReplyToNoRequestIsRejected) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> word = c.alloc<std::uint64_t>(1);
  const std::uint64_t initial = 40;
  gnio_test::to_device(c.local(word), &initial, sizeof initial);
  c.bootstrap().barrier();
  DeviceComm dc = c.device_handle();
  const int me = c.rank();
  const auto start = std::chrono::steady_clock::now();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    // What it returns once the communicator aborted is not the refused answer's value; the
    // kernel may still be running when the host sees the error, so it is not read here.
    if (me == 0) (void)dc.atomic_fetch_add(word, std::uint64_t{2}, 1);
  });
  expect_reply_refused(c, start, "answers no open");
  c.free(word);
}

/// Collectives across nodes: the host API (Auto = ring through the proxy) and the device API
/// inside a kernel, both checked element by element; in-place and out-of-place.
GNIO_KERNEL_TEST(Net, CollectivesAcrossNodes) {
#if GNIO_NET_TEST_COLL
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const std::size_t count = 100003;  // several ring messages per block, odd tail
  SymPtr<std::int32_t> buf = c.alloc<std::int32_t>(count);
  auto* out = static_cast<std::int32_t*>(c.alloc_device(count * sizeof(std::int32_t)));
  auto* bad = static_cast<std::uint32_t*>(c.alloc_device(4));
  auto value = [](int r, std::size_t i) {
    return static_cast<std::int32_t>((i * 7 + 3) % 1000 + r * 1000);
  };
  std::vector<std::int32_t> in(count), want(count), got(count, -1);
  for (std::size_t i = 0; i < count; ++i) {
    in[i] = value(me, i);
    want[i] = 0;
    for (int r = 0; r < n; ++r) want[i] += value(r, i);
  }
  gnio_test::to_device(c.local(buf), in.data(), count * 4);
  std::vector<std::int32_t> poison(count, -7);
  gnio_test::to_device(out, poison.data(), count * 4);
  gnio::allreduce(c, c.local(buf), out, count, gnio::DataType::I32, gnio::RedOp::Sum, stream());
  c.synchronize(stream());
  gnio_test::to_host(got.data(), out, count * 4);
  EXPECT_EQ(got, want) << "host allreduce across nodes";
  EXPECT_EQ(gnio::coll_algorithm(c, gnio::CollKind::AllReduce, count, gnio::DataType::I32),
            gnio::CollAlgo::Ring);

  // In a kernel, in place, twice: sum, then sum again (n * sum).
  gnio::CollComm cc = gnio::coll_comm(c, stream());
  EXPECT_FALSE(cc.peer_memory());
  std::uint32_t zero = 0;
  gnio_test::to_device(bad, &zero, 4);
  std::int32_t* x = c.local(buf);
  gnio::launch(stream(), {.grid = 1, .block = 8}, [=] GNIO_HD() {
    std::uint32_t fails = 0;
    for (int k = 0; k < 2; ++k)
      fails += cc.allreduce<gnio::Block>(x, x, count, gnio::op::Sum{}) != gnio::Status::Ok;
    if (gnio::dev::thread() == 0)
      gnio::dev::atomic_fetch_add(bad, fails, gnio::dev::Order::Relaxed);
  });
  c.synchronize(stream());
  std::uint32_t fails = 1;
  gnio_test::to_host(&fails, bad, 4);
  EXPECT_EQ(fails, 0u);
  gnio_test::to_host(got.data(), x, count * 4);
  for (std::size_t i = 0; i < count; ++i) want[i] *= n;
  EXPECT_EQ(got, want) << "device allreduce across nodes";
  c.bootstrap().barrier();
  c.free_device(bad);
  c.free_device(out);
  c.free(buf);
#else
  GTEST_SKIP() << "built without the collectives (GNIO_COLL=OFF)";
#endif
}

/// An algorithm that reads and writes peers' memory (here TwoShot) called in a kernel on a team
/// that spans nodes: Unsupported at once, naming the call and the peer, and nothing hangs.
GNIO_KERNEL_TEST(NetFault, PeerMemoryAlgorithmAcrossNodesIsUnsupported) {
#if GNIO_NET_TEST_COLL
  gnio::Comm& c = comm();
  SymPtr<float> buf = c.alloc<float>(64);
  auto* status = static_cast<std::uint32_t*>(c.alloc_device(4));
  constexpr std::uint32_t kNotYet = 0xffffffffu;
  std::uint32_t not_yet = kNotYet;
  gnio_test::to_device(status, &not_yet, 4);
  gnio::CollComm cc = gnio::coll_comm(c, stream());
  float* x = c.local(buf);
  const auto start = std::chrono::steady_clock::now();
  gnio::launch(stream(), {.grid = 1, .block = 4}, [=] GNIO_HD() {
    const gnio::Status st =
        cc.allreduce<gnio::Block>(x, x, 64, gnio::op::Sum{}, gnio::CollAlgo::TwoShot);
    if (gnio::dev::thread() == 0)
      gnio::dev::atomic_store(status, static_cast<std::uint32_t>(st), gnio::dev::Order::Release);
  });
  std::string msg;
  try {
    c.synchronize(stream());
    ADD_FAILURE() << "expected Unsupported";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::Unsupported) << e.what();
    msg = e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(msg.find("allreduce(twoshot)"), std::string::npos) << msg;
  // The host learns of the failure from the device's record, possibly before the kernel stored
  // its status: wait for it (host backend: plain memory; the communicator is aborted).
  std::uint32_t st = kNotYet;
  for (int i = 0; i < 5000 && st == kNotYet; ++i) {
    st = __atomic_load_n(status, __ATOMIC_ACQUIRE);
    if (st == kNotYet) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(st, static_cast<std::uint32_t>(gnio::Status::Unsupported));
  c.bootstrap().barrier();
  c.free_device(status);
  c.free(buf);
#else
  GTEST_SKIP() << "built without the collectives (GNIO_COLL=OFF)";
#endif
}

}  // namespace rma_net_test
