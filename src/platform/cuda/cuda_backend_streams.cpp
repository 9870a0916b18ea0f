// CudaBackend's streams and what it queues on them: copies and fills, word atomics and deliveries
// (their kernels are in cuda_stream_ops.cu), the delivery agent, and device-wide synchronization.
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/cuda/cuda_backend.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_scoped_device.hpp"
#include "platform/cuda/cuda_stream_ops.hpp"

namespace gnio::platform {
namespace {

using cuda_impl::ScopedDevice;

/// The stream behind a StreamRef; a host-backend stream is the caller's mistake.
cudaStream_t cuda_stream(StreamRef s, int device) {
  GNIO_REQUIRE(!s.is_host(),
               "a host-backend stream was passed to the cuda backend (GPU %d); use a Stream "
               "created on this communicator or a cudaStream_t",
               device);
  return s.cuda();
}

}  // namespace

// ---- streams -----------------------------------------------------------------------------------

void CudaBackend::create_stream(CUstream_st** cuda, detail::HostStream** host) {
  GNIO_REQUIRE(cuda, "create_stream on GPU %d: the cuda out-pointer is null", device_);
  if (host) *host = nullptr;
  ScopedDevice guard(device_);
  cudaStream_t s = nullptr;
  // Non-blocking: gnio's streams must not serialise with the application's legacy default stream,
  // or a collective waiting for a peer could wait behind unrelated work (and deadlock with it).
  GNIO_CUDA_CHECK(device_, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags(non-blocking)");
  *cuda = s;
}

void CudaBackend::destroy_stream(CUstream_st* cuda, detail::HostStream* host) noexcept {
  if (host)
    GNIO_WARN(Init, "destroy_stream on GPU %d: a host-backend stream was passed; ignored", device_);
  if (!cuda) return;
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaStreamDestroy(cuda); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaStreamDestroy(%p)", static_cast<void*>(cuda));
}

bool CudaBackend::stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) {
  // The CUDA runtime can block a thread until a stream ends, but not for a bounded time, so this
  // polls: quickly for the first 100 queries (short kernels end within them), then every 200 us.
  const auto until = std::chrono::steady_clock::now() + at_most;
  for (int polls = 0;; ++polls) {
    if (stream_idle(s)) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 5 : 200));
  }
}

bool CudaBackend::stream_idle(StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  ScopedDevice guard(device_);
  cudaError_t e = cudaStreamQuery(stream);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error a launch check should see
    return false;
  }
  cuda_impl::fail_runtime(e, device_, "cudaStreamQuery(%p)", static_cast<void*>(stream));
}

void CudaBackend::stream_synchronize(StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaStreamSynchronize(stream), "cudaStreamSynchronize(%p)",
                  static_cast<void*>(stream));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t n, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  if (n == 0) return;
  GNIO_REQUIRE(dst && src, "copy(%p <- %p, %zu bytes) on GPU %d: null address", dst, src, n,
               device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream),
                  "cudaMemcpyAsync(%p <- %p, %zu bytes)", dst, src, n);
}

void CudaBackend::fill(void* dst, int value, std::size_t n, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  if (n == 0) return;
  GNIO_REQUIRE(dst, "fill(%p, %zu bytes) on GPU %d: null address", dst, n, device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaMemsetAsync(dst, value, n, stream),
                  "cudaMemsetAsync(%p, 0x%02x, %zu bytes)", dst, value & 0xff, n);
}

void CudaBackend::word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                              std::uint64_t expected, std::uint64_t* old, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(
      word && (width == 4 || width == 8) && reinterpret_cast<std::uintptr_t>(word) % width == 0,
      "word_atomic on GPU %d: %p is not an aligned %u-byte word", device_, word, width);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_,
                  launch_word_atomic_kernel(word, width, op, operand, expected, old, stream),
                  "launching the word_atomic kernel (%u bytes at %p)", width, word);
}

void CudaBackend::deliver(const Delivery& d, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(well_formed(d),
               "deliver on GPU %d: bad delivery (%zu bytes %p -> %p, signal word %p, mark word %p)",
               device_, d.bytes, d.src, d.dst, static_cast<void*>(d.word),
               static_cast<void*>(d.done));
  ScopedDevice guard(device_);
  Delivery rest = d;
  if (d.bytes > kDeliverKernelBytes) {
    // The copy engine moves large data faster than threads reading over the bus.
    GNIO_CUDA_CHECK(device_, cudaMemcpyAsync(d.dst, d.src, d.bytes, cudaMemcpyDefault, stream),
                    "cudaMemcpyAsync(%p <- %p, %zu bytes) (deliver)", d.dst, d.src, d.bytes);
    rest.bytes = 0;
  }
  if (rest.bytes == 0 && !rest.word && !rest.done) return;
  GNIO_CUDA_CHECK(device_, launch_deliver_kernel(rest, stream),
                  "launching the deliver kernel (%zu bytes to %p, signal word %p)", rest.bytes,
                  rest.dst, static_cast<void*>(rest.word));
}

void CudaBackend::deliver_batch(const Delivery* d, std::size_t count, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  const std::string who = "deliver_batch on GPU " + std::to_string(device_);
  require_deliverable_batch(d, count, who.c_str());
  if (count == 0) return;
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, launch_deliver_batch_kernel(d, count, stream),
                  "launching the deliver kernel for a batch of %zu deliveries", count);
}

void CudaBackend::start_delivery_agent(DeliveryRing* ring, AgentScratch* scratch, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(ring && scratch, "start_delivery_agent on GPU %d: no ring or no scratch", device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, launch_delivery_agent_kernel(ring, scratch, stream),
                  "launching the delivery agent (ring %p)", static_cast<void*>(ring));
}

void CudaBackend::device_synchronize() {
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace gnio::platform
