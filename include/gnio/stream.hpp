// Streams: ordered queues of work (kernels, copies) on a communicator's platform backend.
// On the cuda backend a Stream wraps a cudaStream_t; on the host backend it is a task queue run
// by a CPU thread. Functions that take work "on a stream" accept a StreamRef, which converts from
// a Stream or from a raw cudaStream_t.
#pragma once

#include <memory>

struct CUstream_st;  // cudaStream_t is CUstream_st*: accepted without including CUDA headers

namespace gnio {

namespace detail {
class HostStream;
class CommImpl;
}  // namespace detail

class Comm;

/// An owned stream of the communicator's backend. Movable, not copyable.
class Stream {
 public:
  /// Creates a stream on `comm`'s backend (a non-blocking CUDA stream on the cuda backend).
  explicit Stream(const Comm& comm);
  ~Stream();
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// The CUDA stream (cuda backend), or nullptr on the host backend.
  CUstream_st* cuda() const noexcept { return cuda_; }
  /// The host task queue (host backend), or nullptr on the cuda backend.
  detail::HostStream* host() const noexcept { return host_; }

  /// Blocks until all work queued so far has finished. For a wait that also reports device-side
  /// timeouts and peer failures, use Comm::synchronize(stream).
  void synchronize() const;

 private:
  std::shared_ptr<detail::CommImpl> comm_;  // keeps the backend alive while the stream exists
  CUstream_st* cuda_ = nullptr;
  detail::HostStream* host_ = nullptr;
};

/// A non-owning reference to a stream of either backend.
class StreamRef {
 public:
  /// A CUDA stream (cudaStream_t; 0 is the legacy default stream).
  StreamRef(CUstream_st* cuda) noexcept : cuda_(cuda) {}  // NOLINT: implicit by design
  /// A gnio Stream of either backend.
  StreamRef(const Stream& s) noexcept : cuda_(s.cuda()), host_(s.host()) {}  // NOLINT
  /// A host-backend task queue (internal use).
  explicit StreamRef(detail::HostStream* host) noexcept : host_(host) {}

  bool is_host() const noexcept { return host_ != nullptr; }
  CUstream_st* cuda() const noexcept { return cuda_; }
  detail::HostStream* host() const noexcept { return host_; }

 private:
  CUstream_st* cuda_ = nullptr;
  detail::HostStream* host_ = nullptr;
};

namespace detail {
/// Queues `task` on a host stream; it runs after everything queued before it.
void host_stream_enqueue(HostStream* s, std::unique_ptr<struct HostTask> task);
}  // namespace detail

}  // namespace gnio
