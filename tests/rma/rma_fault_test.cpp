// Device-API failure paths: a wait on a peer that never comes ends within GNIO_TIMEOUT with a
// Timeout that names the call site, the address and (for team syncs) the stalled rank; bad peers
// are InvalidArgument; peers no transport reaches are Unsupported. Each test runs in its own
// process pair (see CMakeLists.txt) because a failure leaves the communicator aborted.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/gnio_test.hpp"
#if GNIO_NET_TEST_COLL
#include "gnio/coll.hpp"
#endif

namespace rma_fault_test {

using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::stream;

/// Runs `launch_fn`, expects comm().synchronize to throw `cls`, returns the message and checks
/// the failure came within the deadline.
template <class F>
std::string expect_failure(gnio::ErrorClass cls, F launch_fn, double max_seconds) {
  auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    launch_fn();
    comm().synchronize(stream());
    ADD_FAILURE() << "expected a gnio::Error";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), cls) << e.what();
    message = e.what();
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, max_seconds) << message;
  return message;
}

void wait_forever_kernel(DeviceComm dc, SymPtr<std::uint64_t> sig) {
  gnio::launch(stream(), {.grid = 1, .block = 32},
               [=] GNIO_HD() { (void)dc.wait_signal<gnio::Warp>(sig, Cmp::Ge, 1); });
}

/// A signal word nobody will set, zero on every rank before any rank goes on.
SymPtr<std::uint64_t> zeroed_signal(gnio::Comm& c) {
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  std::uint64_t zero = 0;
  gnio_test::to_device(c.local(sig), &zero, 8);
  c.bootstrap().barrier();
  return sig;
}

/// Raises rank `target`'s `sig` to 1, 2, ..., steps, one step every `step_ns`.
void slow_signal_kernel(DeviceComm dc, SymPtr<std::uint64_t> sig, std::uint64_t steps,
                        std::uint64_t step_ns, int target) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    const std::uint64_t t0 = gnio::dev::now_ns();
    for (std::uint64_t k = 1; k <= steps; ++k) {
      while (gnio::dev::now_ns() - t0 < k * step_ns) gnio::dev::poll_pause(0);
      dc.signal(sig, k, gnio::SignalOp::Set, target);
    }
  });
}

void wait_signal_kernel(DeviceComm dc, SymPtr<std::uint64_t> sig, std::uint64_t value) {
  gnio::launch(stream(), {.grid = 1, .block = 1},
               [=] GNIO_HD() { (void)dc.wait_signal(sig, Cmp::Ge, value); });
}

// A timeout means "no progress for GNIO_TIMEOUT", not "the whole wait took longer": rank 1 raises
// rank 0's signal one step every 0.4 x GNIO_TIMEOUT for 2.4 x GNIO_TIMEOUT in all, and rank 0's
// single wait for the last step must succeed (before 2026-12-03 it timed out after GNIO_TIMEOUT).
TEST(Timeout, SlowProgressIsNotATimeout) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> sig = zeroed_signal(c);
  const char* t = std::getenv("GNIO_TIMEOUT");
  const std::uint64_t step_ns = static_cast<std::uint64_t>((t ? std::atof(t) : 2.0) * 0.4e9);
  constexpr std::uint64_t kSteps = 6;
  DeviceComm dc = c.device_handle();
  auto start = std::chrono::steady_clock::now();
  if (c.rank() == 1)
    slow_signal_kernel(dc, sig, kSteps, step_ns, 0);
  else if (c.rank() == 0)
    wait_signal_kernel(dc, sig, kSteps);
  EXPECT_NO_THROW(c.synchronize(stream()));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (c.rank() == 0) {
    EXPECT_GT(took, 2.0 * static_cast<double>(step_ns) / 1e9) << "the wait ended early";
  }
  c.bootstrap().barrier();
}

TEST(Timeout, WaitSignalNamesCallSiteAndAddress) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> sig = zeroed_signal(c);
  if (c.rank() == 0) {
    DeviceComm dc = c.device_handle();
    std::string msg = expect_failure(
        gnio::ErrorClass::Timeout, [&] { wait_forever_kernel(dc, sig); }, 10);
    EXPECT_NE(msg.find("wait_signal"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rma_fault_test.cpp"), std::string::npos) << msg;
    EXPECT_NE(msg.find(">= 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("last saw 0"), std::string::npos) << msg;
    EXPECT_TRUE(c.aborted());
  }
  c.bootstrap().barrier();
}

/// Host memory a device-to-host copy lands in without blocking the caller: page-locked on the
/// cuda backend (a copy into pageable memory may wait for the stream's earlier work first, which
/// here is a wait that only the abort ends).
struct LandingBuffer {
  std::uint8_t* p = nullptr;
  std::vector<std::uint8_t> plain;
  explicit LandingBuffer(std::size_t bytes) {
#if defined(__CUDACC__)
    if (cudaMallocHost(reinterpret_cast<void**>(&p), bytes) != cudaSuccess) p = nullptr;
#endif
    if (!p) {
      plain.resize(bytes);
      p = plain.data();
    }
  }
  ~LandingBuffer() {
#if defined(__CUDACC__)
    if (plain.empty() && p) cudaFreeHost(p);
#endif
  }
};

// A failed communicator's synchronize still lets the stream drain before it throws: a caller
// that frees its buffers once the call threw must not have queued work still reading them (before
// 2026-12-02 it threw at once; the host backend's stream then copied from freed memory).
TEST(Abort, SynchronizeLetsQueuedWorkEndBeforeThrowing) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> sig = zeroed_signal(c);
  if (c.rank() == 0) {
    // 64 MiB from device memory to host memory, queued behind a wait that only the abort ends.
    const std::size_t bytes = std::size_t{64} << 20;
    std::vector<std::uint8_t> pattern(bytes);
    for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::uint8_t>(i * 7 + 1);
    auto* src = static_cast<std::uint8_t*>(c.alloc_device(bytes));
    gnio_test::to_device(src, pattern.data(), bytes);
    LandingBuffer dst(bytes);
    std::memset(dst.p, gnio_test::kPoison, bytes);
    wait_forever_kernel(c.device_handle(), sig);
    c.copy(dst.p, src, bytes, stream());
    c.abort();
    std::string message = expect_failure(
        gnio::ErrorClass::RemoteError, [] {}, 10);
    EXPECT_NE(message.find("aborted"), std::string::npos) << message;
    EXPECT_EQ(std::memcmp(dst.p, pattern.data(), bytes), 0)
        << "the copy queued before the failure had not run when synchronize threw";
    c.free_device(src);
  }
  c.bootstrap().barrier();
}

void sync_kernel(DeviceComm dc) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() { (void)dc.sync(dc.world()); });
}

TEST(Timeout, SyncNamesTheStalledRank) {
  gnio::Comm& c = comm();
  c.bootstrap().barrier();
  if (c.rank() == 0) {
    DeviceComm dc = c.device_handle();
    std::string msg = expect_failure(
        gnio::ErrorClass::Timeout, [&] { sync_kernel(dc); }, 10);
    EXPECT_NE(msg.find("expected from rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sync"), std::string::npos) << msg;
  }
  c.bootstrap().barrier();
}

void put_to_kernel(DeviceComm dc, SymPtr<std::uint8_t> dst, const std::uint8_t* src, int peer) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() { dc.put(dst, src, 8, peer); });
}

TEST(BadInput, PeerOutOfRangeIsInvalidArgument) {
  gnio::Comm& c = comm();
  SymPtr<std::uint8_t> buf = c.alloc<std::uint8_t>(64);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(64));
  DeviceComm dc = c.device_handle();
  std::string msg = expect_failure(
      gnio::ErrorClass::InvalidArgument, [&] { put_to_kernel(dc, buf, src, c.size()); }, 10);
  EXPECT_NE(msg.find("put"), std::string::npos) << msg;
  c.bootstrap().barrier();
}

TEST(BadInput, OffsetBeyondHeapIsInvalidArgument) {
  gnio::Comm& c = comm();
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(64));
  DeviceComm dc = c.device_handle();
  const gnio::detail::DeviceCommState& heap = gnio::detail::DeviceCommPort::state(dc);
  SymPtr<std::uint8_t> beyond{heap.heap_id_, 0, heap.heap_bytes_ - 4};
  expect_failure(
      gnio::ErrorClass::InvalidArgument, [&] { put_to_kernel(dc, beyond, src, 0); }, 10);
  c.bootstrap().barrier();
}

#if GNIO_NET_TEST_COLL
// Collectives over the nodes need the network transport: without one the call is refused on the
// host, before anything is enqueued, and the communicator stays usable. (Before the RMA case,
// whose device error ends the communicator.)
TEST(Unreachable, CollectivesAcrossNodesWithoutTransportAreUnsupported) {
  gnio::Comm& c = comm();
  ASSERT_EQ(c.nodes(), 2) << "run with gnio-run --nodes 2";
  auto* buf = static_cast<float*>(c.alloc_device(64 * sizeof(float)));
  std::string msg;
  try {
    gnio::allreduce(c, buf, buf, 64, gnio::DataType::F32, gnio::RedOp::Sum, stream());
    ADD_FAILURE() << "expected Unsupported";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::Unsupported) << e.what();
    msg = e.what();
  }
  EXPECT_NE(msg.find("network transport"), std::string::npos) << msg;
  EXPECT_FALSE(c.aborted());
  c.synchronize(stream());  // nothing was enqueued; the stream still works
  c.bootstrap().barrier();
  c.free_device(buf);
}
#endif

TEST(Unreachable, PeerOnAnotherNodeIsUnsupported) {
  gnio::Comm& c = comm();
  ASSERT_EQ(c.nodes(), 2) << "run with gnio-run --nodes 2";
  SymPtr<std::uint8_t> buf = c.alloc<std::uint8_t>(64);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(64));
  DeviceComm dc = c.device_handle();
  EXPECT_FALSE(dc.is_p2p(1 - c.rank()));
  std::string msg = expect_failure(
      gnio::ErrorClass::Unsupported, [&] { put_to_kernel(dc, buf, src, 1 - c.rank()); }, 10);
  EXPECT_NE(msg.find("no transport"), std::string::npos) << msg;
  c.bootstrap().barrier();
}

}  // namespace rma_fault_test
