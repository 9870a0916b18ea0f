// A persistent kernel that holds a block on every SM (the GPU's multiprocessor count; 4 blocks on
// the host backend) and returns only once it has received everything, through the proxy
// (2 ranks as 2 nodes, GNIO_NET=tcp): rank 0's block b put_signals rounds of data into block b's
// region of rank 1, alternating small puts (batched deliveries) and puts past the deliver
// kernel's limit (copy engine), each acknowledged by rank 1's block b after it checked every
// byte. The proxy's deliveries into GPU memory must run beside the kernel, never behind it.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/gnio_test.hpp"

namespace rma_persistent_test {

using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

constexpr int kRounds = 6;
constexpr std::size_t kRegion = 72 << 10;  // > 64 KiB: the copy engine's path too
constexpr unsigned kThreads = 128;

/// Blocks of the persistent kernel: one per SM on a GPU, 4 on the host backend.
unsigned blocks_on_every_sm() {
  if (const char* n = std::getenv("GNIO_TEST_PERSISTENT_BLOCKS"))
    return static_cast<unsigned>(std::atoi(n));
#if defined(__CUDACC__)
  int device = 0, sms = 0;
  if (comm().backend() != gnio::Backend::Host && cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess)
    return static_cast<unsigned>(sms);
#endif
  return 4;
}

/// The bytes of round `r` of block `b`: small on even rounds, past 64 KiB on odd ones.
GNIO_HD_INLINE std::size_t round_bytes(int r, unsigned b) {
  return r % 2 ? kRegion - b : 1000 + 8 * b + r;
}

/// The pattern rank 0 sends: round r's source starts r bytes in, so every round's data differs.
GNIO_HD_INLINE std::uint8_t sent_byte(std::size_t i) {
  return pattern_byte(0, i, 17);
}

void persistent_kernel(DeviceComm dc, unsigned blocks, SymPtr<std::uint8_t> dst,
                       SymPtr<std::uint64_t> ready, SymPtr<std::uint64_t> ack,
                       const std::uint8_t* src, std::uint64_t* wrong, int me) {
  const int peer = 1 - me;
  gnio::launch(stream(), {.grid = blocks, .block = kThreads}, [=] GNIO_HD() {
    const unsigned b = gnio::dev::block(), t = gnio::dev::thread();
    const std::size_t region = b * kRegion;
    for (int r = 0; r < kRounds; ++r) {
      const std::size_t n = round_bytes(r, b);
      const auto round = static_cast<std::uint64_t>(r + 1);
      if (me == 0) {
        dc.put_signal<gnio::Block>(dst + region, src + region + r, n, ready + b, round,
                                   SignalOp::Set, peer);
        if (dc.wait_signal<gnio::Block>(ack + b, Cmp::Ge, round) != gnio::Status::Ok) return;
      } else {
        if (dc.wait_signal<gnio::Block>(ready + b, Cmp::Ge, round) != gnio::Status::Ok) return;
        const std::uint8_t* got = dc.local(dst) + region;
        std::uint64_t bad = 0;
        for (std::size_t i = t; i < n; i += kThreads) bad += got[i] != sent_byte(region + r + i);
        if (bad) gnio::dev::atomic_fetch_add(wrong, bad, gnio::dev::Order::Relaxed);
        gnio::dev::sync_block();
        if (t == 0) dc.signal(ack + b, round, SignalOp::Set, peer);
      }
    }
    if (t == 0) (void)dc.quiet();
  });
}

TEST(Persistent, KernelOnEverySmReceivesPutsAndSignals) {
  gnio::Comm& c = comm();
  ASSERT_EQ(c.nodes(), 2) << "run with gnio-run --nodes 2";
  const int me = c.rank();
  const unsigned blocks = blocks_on_every_sm();
  const std::size_t bytes = kRegion * blocks;
  SymPtr<std::uint8_t> dst = c.alloc<std::uint8_t>(bytes);
  SymPtr<std::uint64_t> ready = c.alloc<std::uint64_t>(blocks),
                        ack = c.alloc<std::uint64_t>(blocks);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(bytes + kRounds));
  auto* wrong = static_cast<std::uint64_t*>(c.alloc_device(sizeof(std::uint64_t)));
  std::vector<std::uint8_t> host(bytes + kRounds), poison(bytes, kPoison);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = sent_byte(i);
  gnio_test::to_device(src, host.data(), host.size());
  gnio_test::to_device(c.local(dst), poison.data(), bytes);
  const std::vector<std::uint64_t> zeros(blocks, 0);
  gnio_test::to_device(c.local(ready), zeros.data(), blocks * sizeof(std::uint64_t));
  gnio_test::to_device(c.local(ack), zeros.data(), blocks * sizeof(std::uint64_t));
  gnio_test::to_device(wrong, zeros.data(), sizeof(std::uint64_t));
  c.bootstrap().barrier();
  persistent_kernel(c.device_handle(), blocks, dst, ready, ack, src, wrong, me);
  c.synchronize(stream());
  std::uint64_t bad = 0;
  gnio_test::to_host(&bad, wrong, sizeof(bad));
  EXPECT_EQ(bad, 0u) << "bytes wrong when their signal was seen";
  std::vector<std::uint64_t> seen(blocks);
  gnio_test::to_host(seen.data(), c.local(me == 0 ? ack : ready), blocks * sizeof(std::uint64_t));
  for (unsigned b = 0; b < blocks; ++b)
    EXPECT_EQ(seen[b], static_cast<std::uint64_t>(kRounds)) << "block " << b << " of " << blocks;
  c.bootstrap().barrier();
  c.free_device(wrong);
  c.free_device(src);
  c.free(ack);
  c.free(ready);
  c.free(dst);
}

}  // namespace rma_persistent_test
