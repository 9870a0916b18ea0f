// The host backend's stream: a FIFO of tasks (kernels, copies, fills, host callbacks) run one after
// another by a dedicated worker thread, so "stream order" means exactly what it means on a GPU.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "gnio/launch.hpp"
#include "gnio/stream.hpp"

namespace gnio::detail {

/// A host-backend stream. Created and destroyed by the host backend (create_stream /
/// destroy_stream); everything else reaches it through a StreamRef.
///
/// Errors: the first exception thrown by a task is kept and rethrown by the next synchronize().
/// Until then the tasks queued behind it are discarded without running, like work behind a
/// failed kernel on a CUDA stream: they usually depend on it, and running them would mostly turn
/// one error into a cascade of timeouts. synchronize() clears the error, so the stream is usable
/// again afterwards.
///
/// A stream belongs to the process that created it; its worker thread does not survive fork(),
/// so using it from a forked child throws Error(Unsupported).
class HostStream {
 public:
  /// Starts the worker thread. Throws Error(SystemError) if it cannot be created.
  HostStream();
  /// Drains the queue and stops the worker (see shutdown()).
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Queues a kernel. Throws Error(InvalidArgument) for a shape the host backend cannot run.
  void enqueue_kernel(std::unique_ptr<HostTask> task);
  /// Queues a host function (copy, fill, callback) to run on the worker in stream order.
  /// `what` names it in error messages; it must outlive the stream (a string literal).
  void enqueue_function(std::function<void()> fn, const char* what);

  /// True when everything queued so far has finished (never blocks, never throws).
  bool idle() const noexcept;
  /// Waits at most `at_most` for everything queued so far to finish (woken when it does); true
  /// if it did. Never throws (errors stay for synchronize()).
  bool wait_idle(std::chrono::microseconds at_most) const noexcept;
  /// Blocks until everything queued so far has finished, then rethrows (and clears) the first
  /// error a task threw since the last synchronize(). Throws Error(InvalidArgument) when called
  /// from a task of this very stream (it would wait for itself).
  void synchronize();
  /// Waits for the queue to drain and stops the worker thread. An error nobody collected is
  /// logged. Idempotent; the destructor calls it.
  void shutdown() noexcept;

 private:
  /// One queued task: exactly one of `kernel` and `function` is set.
  struct Item {
    std::unique_ptr<HostTask> kernel;
    std::function<void()> function;
    const char* what = "";
  };

  void push(Item item);
  void worker_main();
  void check_caller(const char* op) const;

  mutable std::mutex mu_;
  /// Signalled when an item is queued or the stream is stopping.
  std::condition_variable work_cv_;
  /// Signalled when pending_ drops to zero.
  mutable std::condition_variable idle_cv_;
  std::deque<Item> queue_;
  /// Items queued or running; zero means idle.
  std::size_t pending_ = 0;
  /// First error since the last synchronize(), and which task threw it.
  std::exception_ptr error_;
  const char* error_what_ = "";
  bool stopping_ = false;
  bool stopped_ = false;
  /// The process that owns the worker thread.
  pid_t owner_pid_;
  std::thread worker_;
};

/// The stream whose task the calling thread is running (its worker, or a thread of one of its
/// kernels); nullptr elsewhere. Lets synchronize() refuse to wait for itself.
extern thread_local HostStream* t_running_stream;

/// Queues a host callback on a host stream, in stream order (like cudaLaunchHostFunc). An
/// exception it throws is reported by the next synchronize().
void host_stream_enqueue_callback(HostStream* s, std::function<void()> fn);

}  // namespace gnio::detail
