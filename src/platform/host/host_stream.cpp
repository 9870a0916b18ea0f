// Host-backend streams: the FIFO worker, error capture, and the detail:: entry points that
// gnio::launch and the backend's copy/fill use.
#include "platform/host/host_stream.hpp"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <new>
#include <system_error>
#include <utility>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/host/host_launch.hpp"

namespace gnio::detail {

thread_local HostStream* t_running_stream = nullptr;

namespace {

/// How often a synchronize() that is still waiting says so: long enough not to spam a slow but
/// healthy run, short enough that a hung test explains itself well before CI kills it.
constexpr auto kSyncWarnInterval = std::chrono::seconds(30);

const char* what_of(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

HostStream::HostStream() : owner_pid_(getpid()) {
  try {
    worker_ = std::thread([this] { worker_main(); });
  } catch (const std::system_error& e) {
    fail(ErrorClass::SystemError,
         "host backend: cannot start a stream worker thread: %s; too many threads or streams "
         "in this process",
         e.what());
  }
}

HostStream::~HostStream() {
  shutdown();
}

void HostStream::check_caller(const char* op) const {
  if (getpid() != owner_pid_)
    fail(ErrorClass::Unsupported,
         "%s: host stream %p was created by process %d and cannot be used in process %d (a "
         "forked child); create streams after fork()",
         op, static_cast<const void*>(this), static_cast<int>(owner_pid_),
         static_cast<int>(getpid()));
}

void HostStream::push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    GNIO_REQUIRE(!stopping_, "host stream %p is being destroyed; no work can be queued on it",
                 static_cast<const void*>(this));
    queue_.push_back(std::move(item));
    ++pending_;
  }
  work_cv_.notify_one();
}

void HostStream::enqueue_kernel(std::unique_ptr<HostTask> task) {
  GNIO_REQUIRE(task != nullptr && task->body, "host stream: a kernel task needs a body");
  check_launch_dims(task->dims, true);
  check_caller("gnio::launch");
  Item item;
  item.kernel = std::move(task);
  item.what = "kernel";
  push(std::move(item));
}

void HostStream::enqueue_function(std::function<void()> fn, const char* what) {
  GNIO_REQUIRE(static_cast<bool>(fn), "host stream: %s needs a function", what);
  check_caller(what);
  Item item;
  item.function = std::move(fn);
  item.what = what;
  push(std::move(item));
}

bool HostStream::idle() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_ == 0;
}

bool HostStream::wait_idle(std::chrono::microseconds at_most) const noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, at_most, [&] { return pending_ == 0; });
}

void HostStream::synchronize() {
  check_caller("stream synchronize");
  GNIO_REQUIRE(t_running_stream != this,
               "host stream %p: synchronize() called from a task or kernel running on the same "
               "stream would wait for itself; synchronize from another thread",
               static_cast<const void*>(this));
  std::exception_ptr error;
  const char* what = "";
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto start = std::chrono::steady_clock::now();
    while (!idle_cv_.wait_for(lock, kSyncWarnInterval, [&] { return pending_ == 0; })) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      GNIO_WARN(Device,
                "host stream %p: still waiting after %.0f s for %zu queued tasks; a kernel may "
                "be waiting on a peer (device waits end at GNIO_TIMEOUT)",
                static_cast<const void*>(this), waited, pending_);
    }
    error = std::exchange(error_, nullptr);
    what = error_what_;
  }
  if (error) {
    GNIO_INFO(Device, "host stream %p: rethrowing the error of a %s: %s",
              static_cast<const void*>(this), what, what_of(error));
    std::rethrow_exception(error);
  }
}

void HostStream::shutdown() noexcept {
  if (getpid() != owner_pid_) {
    // A forked child: the worker thread (and whoever held mu_ at fork time) exists only in the
    // parent, so neither lock nor join. Forget the parent's thread handle instead of letting
    // std::thread's destructor terminate the child.
    if (!stopped_) {
      stopped_ = true;
      new (&worker_) std::thread();
    }
    return;
  }
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    stopping_ = true;
    idle_cv_.wait(lock, [&] { return pending_ == 0; });
    stopped_ = true;
    error = std::exchange(error_, nullptr);
  }
  work_cv_.notify_one();
  if (worker_.joinable()) worker_.join();
  if (error)
    GNIO_WARN(Device, "host stream %p destroyed with an error nobody synchronized on: %s",
              static_cast<const void*>(this), what_of(error));
}

void HostStream::worker_main() {
  pthread_setname_np(pthread_self(), "gnio-stream");
  t_running_stream = this;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !queue_.empty() || stopped_; });
    if (queue_.empty()) return;  // stopped_ and drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = error_ != nullptr;
    lock.unlock();

    std::exception_ptr error;
    if (!skip) {
      try {
        if (item.kernel)
          platform::host::run_host_kernel(*item.kernel, this);
        else
          item.function();
      } catch (...) {
        error = std::current_exception();
      }
    }
    const char* what = item.what;
    // Destroy the task (and whatever its closure owns) before it counts as finished, so that
    // after synchronize() returns nothing of it is left.
    item = Item();

    lock.lock();
    if (error && !error_) {
      error_ = error;
      error_what_ = what;
    }
    if (--pending_ == 0) idle_cv_.notify_all();
  }
}

void host_stream_enqueue(HostStream* s, std::unique_ptr<HostTask> task) {
  GNIO_REQUIRE(s != nullptr, "host_stream_enqueue: null host stream");
  s->enqueue_kernel(std::move(task));
}

void host_stream_enqueue_callback(HostStream* s, std::function<void()> fn) {
  GNIO_REQUIRE(s != nullptr, "host_stream_enqueue_callback: null host stream");
  s->enqueue_function(std::move(fn), "host callback");
}

void host_launch(HostStream* stream, const LaunchDims& dims, std::function<void()> body) {
  GNIO_REQUIRE(stream != nullptr, "gnio::launch: null host stream");
  host_stream_enqueue(stream, std::make_unique<HostTask>(HostTask{dims, std::move(body)}));
}

}  // namespace gnio::detail
