// Semaphores between a kernel and a CPU thread: 20 000 items through 8 slots, every info record
// exact and in order (the producer waits for Free, writes, sets Ready; the consumer waits for
// Ready, checks, sets Free); a wait with nothing coming times out within its bound; Exit ends a
// waiting kernel at once; bad sizes are InvalidArgument.
#include "gnio/semaphore.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "common/gnio_test.hpp"

namespace semaphore_test {

using gnio::ItemStatus;
using gnio::SemaphoreView;
using gnio_test::comm;
using gnio_test::stream;

constexpr std::uint32_t kItems = 8, kCount = 20000;

struct Record {
  std::uint64_t sequence;
  std::uint64_t square;
};

/// Produces kCount records through `s`; counts the waits that timed out into `*stalls`.
void produce(SemaphoreView s, std::uint32_t* stalls) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    for (std::uint32_t n = 0; n < kCount; ++n) {
      if (!s.wait(n, ItemStatus::Free, 10000000000ull)) {  // 10 s
        *stalls += 1;
        return;
      }
      Record* r = s.info_of<Record>(n);
      r->sequence = n;
      r->square = static_cast<std::uint64_t>(n) * n;
      s.set(n, ItemStatus::Ready);
    }
  });
}

/// A kernel waits up to 60 s for item 1 to be Ready: *out = 1 if it was, 2 if not.
void wait_for_ready(SemaphoreView s, std::uint32_t* out) {
  gnio::launch(stream(), {.grid = 1, .block = 1},
               [=] GNIO_HD() { *out = s.wait(1, ItemStatus::Ready, 60000000000ull) ? 1u : 2u; });
}

TEST(Semaphore, KernelHandsItemsToTheCpuInOrder) {
  gnio::Semaphore sem(comm(), kItems, sizeof(Record));
  const SemaphoreView s = sem.device_handle();
  auto* stalls = static_cast<std::uint32_t*>(comm().alloc_device(sizeof(std::uint32_t)));
  std::uint32_t zero = 0;
  gnio_test::to_device(stalls, &zero, sizeof(zero));
  produce(s, stalls);
  std::uint32_t wrong = 0, got = 0;
  for (std::uint32_t n = 0; n < kCount; ++n) {
    if (!s.wait(n, ItemStatus::Ready, 10000000000ull)) break;
    const Record* r = s.info_of<Record>(n);
    wrong += r->sequence != n || r->square != static_cast<std::uint64_t>(n) * n;
    ++got;
    s.set(n, ItemStatus::Free);
  }
  comm().synchronize(stream());
  std::uint32_t stalled = 0;
  gnio_test::to_host(&stalled, stalls, sizeof(stalled));
  EXPECT_EQ(got, kCount);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(stalled, 0u);
  comm().free_device(stalls);
}

TEST(Semaphore, WaitsAreBoundedAndExitEndsThem) {
  gnio::Semaphore sem(comm(), 2, 16);
  const SemaphoreView s = sem.device_handle();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.wait(0, ItemStatus::Ready, 50000000));  // 50 ms, nothing comes
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 2.0);
  // A kernel waiting (60 s) for Ready on item 1 ends once the host sets Exit.
  auto* out = static_cast<std::uint32_t*>(comm().alloc_device(sizeof(std::uint32_t)));
  wait_for_ready(s, out);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t1 = std::chrono::steady_clock::now();
  s.set(1, ItemStatus::Exit);
  comm().synchronize(stream());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 5.0);
  std::uint32_t result = 0;
  gnio_test::to_host(&result, out, sizeof(result));
  EXPECT_EQ(result, 2u) << "Exit is not the status waited for: the wait reports false";
  comm().free_device(out);
}

TEST(Semaphore, BadSizesAreInvalidArgument) {
  for (auto [items, bytes] : {std::pair{0u, 8u}, std::pair{65537u, 8u}, std::pair{4u, 65537u}}) {
    try {
      gnio::Semaphore bad(comm(), items, bytes);
      ADD_FAILURE() << items << " items of " << bytes << " bytes were accepted";
    } catch (const gnio::Error& e) {
      EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    }
  }
}

}  // namespace semaphore_test
