// Host-backend streams: FIFO order across kernels, copies, fills and callbacks; errors captured and
// rethrown by synchronize (and the work behind them skipped); idle/synchronize/destroy/
// device_synchronize semantics; misuse rejected.
#include "platform/host/host_stream.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/fail.hpp"
#include "gnio/launch.hpp"
#include "host_test_util.hpp"

namespace {

using gnio::ErrorClass;
using gnio_host_test::error_class_of;
using gnio_host_test::HostBackendTest;

using StreamTest = HostBackendTest;

// 600 tasks of all four kinds append their index to one log. Each task kind runs on a different
// thread (kernel threads, the stream worker), so the log is plain memory that only stream order
// protects: out-of-order shows in the values, a missing happens-before under ThreadSanitizer.
TEST_F(StreamTest, TasksRunInFifoOrderWhateverTheirKind) {
  constexpr int kTasks = 600;
  std::vector<int> log;
  log.reserve(kTasks);
  std::vector<int> src(kTasks), dst(kTasks, -1);
  for (int i = 0; i < kTasks; ++i) src[i] = i * 7 + 1;
  std::vector<unsigned char> filled(kTasks, 0);
  std::vector<int>* lp = &log;
  for (int i = 0; i < kTasks; ++i) {
    switch (i % 4) {
      case 0:
        gnio::launch(stream(), {.grid = 2, .block = 3}, [lp, i] {
          if (gnio::dev::global_thread() == 4) lp->push_back(i);
        });
        break;
      case 1:
        gnio::detail::host_stream_enqueue_callback(host_, [lp, i] { lp->push_back(i); });
        break;
      case 2:
        // A copy of one element, and a callback that checks it landed before logging.
        backend_->copy(&dst[i], &src[i], sizeof(int), stream());
        gnio::detail::host_stream_enqueue_callback(
            host_, [lp, i, &dst, &src] { lp->push_back(dst[i] == src[i] ? i : -i); });
        break;
      case 3:
        backend_->fill(&filled[i], 0x5C, 1, stream());
        gnio::detail::host_stream_enqueue_callback(
            host_, [lp, i, &filled] { lp->push_back(filled[i] == 0x5C ? i : -i); });
        break;
    }
  }
  sync();
  ASSERT_EQ(log.size(), static_cast<std::size_t>(kTasks));
  int wrong = 0;
  for (int i = 0; i < kTasks; ++i) wrong += log[i] != i;
  EXPECT_EQ(wrong, 0) << "#tasks out of order or with their copy/fill not done";
}

// A kernel, copies and fills chained through device memory: each step reads what the previous
// one wrote, so any reordering changes the result.
TEST_F(StreamTest, KernelsCopiesAndFillsChainThroughDeviceMemory) {
  constexpr std::size_t kN = 4096;
  auto* a = static_cast<std::uint32_t*>(backend_->alloc_device(kN * sizeof(std::uint32_t)));
  auto* b = static_cast<std::uint32_t*>(backend_->alloc_device(kN * sizeof(std::uint32_t)));
  ASSERT_TRUE(a && b);
  std::vector<std::uint32_t> out(kN, 0);
  backend_->fill(a, 0x11, kN * sizeof(std::uint32_t), stream());  // a[i] = 0x11111111
  gnio::launch(stream(), {.grid = 4, .block = 64}, [a] {
    for (std::size_t i = gnio::dev::global_thread(); i < kN; i += gnio::dev::global_threads())
      a[i] = a[i] + static_cast<std::uint32_t>(i) * 3;
  });
  backend_->copy(b, a, kN * sizeof(std::uint32_t), stream());
  backend_->fill(a, 0x22, kN * sizeof(std::uint32_t), stream());  // must not reach b
  gnio::launch(stream(), {.grid = 2, .block = 32}, [a, b] {
    for (std::size_t i = gnio::dev::global_thread(); i < kN; i += gnio::dev::global_threads())
      b[i] ^= a[i];
  });
  backend_->copy(out.data(), b, kN * sizeof(std::uint32_t), stream());
  sync();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kN; ++i)
    wrong += out[i] != ((0x11111111u + static_cast<std::uint32_t>(i) * 3) ^ 0x22222222u);
  EXPECT_EQ(wrong, 0u) << "#wrong elements out of " << kN;
  backend_->free_device(a);
  backend_->free_device(b);
}

// The first error is rethrown by synchronize; what was queued behind it does not run; the
// stream is usable again afterwards.
TEST_F(StreamTest, ErrorIsRethrownOnceAndWorkBehindItIsSkipped) {
  std::vector<unsigned char> buf(64, 0x01);
  gnio::detail::host_stream_enqueue_callback(host_,
                                             [] { throw std::runtime_error("callback broke"); });
  backend_->fill(buf.data(), 0x7E, buf.size(), stream());  // skipped
  gnio::launch(stream(), {.grid = 1, .block = 1}, [] { throw std::logic_error("second error"); });
  try {
    sync();
    ADD_FAILURE() << "synchronize did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "callback broke");  // the first error, as thrown
  }
  EXPECT_EQ(buf[0], 0x01) << "a fill queued behind a failed task ran";
  EXPECT_NO_THROW(sync());  // reported once
  backend_->fill(buf.data(), 0x7E, buf.size(), stream());
  sync();
  EXPECT_EQ(buf[63], 0x7E);
}

TEST_F(StreamTest, IdleReflectsQueuedWork) {
  EXPECT_TRUE(backend_->stream_idle(stream()));
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  gnio::detail::host_stream_enqueue_callback(host_, [gate] { gate.wait(); });
  std::atomic<int> ran{0};
  auto* r = &ran;
  gnio::launch(stream(), {.grid = 1, .block = 4}, [r] { r->fetch_add(1); });
  EXPECT_FALSE(backend_->stream_idle(stream()));
  EXPECT_EQ(ran.load(), 0);
  go.set_value();
  sync();
  EXPECT_TRUE(backend_->stream_idle(stream()));
  EXPECT_EQ(ran.load(), 4);
}

// Comm::synchronize waits through stream_wait_idle: while work runs it must give up after about
// the time asked (so the caller can look for failures), and it must return as soon as the work
// ends, not at the end of that time.
TEST_F(StreamTest, WaitIdleReturnsWhenTheWorkEnds) {
  using namespace std::chrono;
  EXPECT_TRUE(backend_->stream_wait_idle(stream(), microseconds(0)));
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  gnio::detail::host_stream_enqueue_callback(host_, [gate] { gate.wait(); });
  auto t0 = steady_clock::now();
  EXPECT_FALSE(backend_->stream_wait_idle(stream(), milliseconds(20)));
  EXPECT_GE(steady_clock::now() - t0, milliseconds(19));
  std::thread opener([&go] {
    std::this_thread::sleep_for(milliseconds(50));
    go.set_value();
  });
  t0 = steady_clock::now();
  EXPECT_TRUE(backend_->stream_wait_idle(stream(), seconds(30)));
  EXPECT_LT(steady_clock::now() - t0, seconds(10)) << "woken by the end of the work, not the limit";
  opener.join();
  sync();
}

TEST_F(StreamTest, DestroyDrainsTheQueue) {
  std::vector<unsigned char> buf(4096, 0);
  gnio::detail::host_stream_enqueue_callback(
      host_, [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  backend_->fill(buf.data(), 0x3C, buf.size(), stream());
  backend_->destroy_stream(nullptr, host_);
  host_ = nullptr;
  EXPECT_EQ(buf[0], 0x3C);
  EXPECT_EQ(buf[4095], 0x3C);
}

TEST_F(StreamTest, DeviceSynchronizeWaitsForEveryStreamAndReportsErrors) {
  constexpr int kStreams = 3;
  gnio::detail::HostStream* s[kStreams];
  std::atomic<int> done{0};
  auto* d = &done;
  for (auto*& h : s) {
    CUstream_st* cuda = nullptr;
    backend_->create_stream(&cuda, &h);
    gnio::detail::host_stream_enqueue_callback(h, [d] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      d->fetch_add(1);
    });
  }
  backend_->device_synchronize();
  EXPECT_EQ(done.load(), kStreams);

  gnio::detail::host_stream_enqueue_callback(
      s[1], [] { gnio::fail(ErrorClass::RemoteError, "peer 3 vanished"); });
  EXPECT_EQ(error_class_of([&] { backend_->device_synchronize(); }), ErrorClass::RemoteError);
  EXPECT_NO_THROW(backend_->device_synchronize());
  for (auto* h : s) backend_->destroy_stream(nullptr, h);
}

// Waiting for the stream from one of its own tasks would wait forever; it is refused instead, and
// the refusal is what the outer synchronize reports.
TEST_F(StreamTest, SynchronizingAStreamFromItsOwnTaskIsRejected) {
  gnio::platform::Backend* be = backend_.get();
  gnio::StreamRef self = stream();
  gnio::detail::host_stream_enqueue_callback(host_, [be, self] { be->stream_synchronize(self); });
  EXPECT_EQ(error_class_of([&] { sync(); }), ErrorClass::InvalidArgument);
  gnio::launch(stream(), {.grid = 1, .block = 2}, [be, self] { be->stream_synchronize(self); });
  EXPECT_EQ(error_class_of([&] { sync(); }), ErrorClass::InvalidArgument);
}

TEST_F(StreamTest, MisuseIsInvalidArgumentWithoutEffect) {
  gnio::StreamRef cuda_stream(static_cast<CUstream_st*>(nullptr));
  int x = 5, y = 6;
  EXPECT_EQ(error_class_of([&] { backend_->stream_synchronize(cuda_stream); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { backend_->stream_idle(cuda_stream); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { backend_->copy(&x, &y, sizeof x, cuda_stream); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { backend_->copy(nullptr, &y, sizeof x, stream()); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { backend_->fill(nullptr, 0, 4, stream()); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] {
              gnio::detail::host_stream_enqueue_callback(host_, std::function<void()>());
            }),
            ErrorClass::InvalidArgument);
  // Zero bytes is a valid no-op, even with null pointers.
  backend_->copy(nullptr, nullptr, 0, stream());
  backend_->fill(nullptr, 0, 0, stream());
  sync();
  EXPECT_EQ(x, 5);
  EXPECT_TRUE(backend_->stream_idle(stream()));
}

TEST(HostBackend, DescribesItself) {
  auto be = gnio::platform::make_host_backend();
  EXPECT_EQ(be->kind(), gnio::platform::BackendKind::Host);
  EXPECT_EQ(be->device(), -1);
  const std::string d = be->describe();
  EXPECT_EQ(d.rfind("host CPU backend, ", 0), 0u) << d;
  EXPECT_NE(d.find(" cores"), std::string::npos) << d;
}

}  // namespace
