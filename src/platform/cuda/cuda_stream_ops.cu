// The kernels behind CudaBackend::word_atomic and CudaBackend::deliver: the only way host code
// can update a word of device memory atomically with respect to kernels (the host cannot address
// device memory, and a copy into it is not atomic). Their stream order after the proxy's data
// copies is what makes a proxied signal visible only after its data.
#include <cuda_runtime.h>

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_stream_ops.hpp"
#include "platform/word_op.hpp"

namespace gnio::platform {
namespace {

constexpr unsigned kDeliverThreads = 512;

template <class T>
__global__ void word_atomic_kernel(T* word, WordOp op, T operand, T expected, std::uint64_t* old) {
  const std::uint64_t before =
      apply_word_op(word, sizeof(T), op, operand, expected, dev::Order::AcqRel);
  if (old) dev::atomic_store(old, before, dev::Order::Release);
}

/// Copies `n` bytes (a multiple of sizeof(V); both pointers V-aligned) with the block. Each
/// thread issues four loads before its stores: reads of host memory cross the bus, and keeping
/// several in flight is what makes them fast.
template <class V>
__device__ void block_copy(char* __restrict__ dst, const char* __restrict__ src, std::size_t n) {
  constexpr unsigned kUnroll = 4;
  const std::size_t count = n / sizeof(V);
  auto* to = reinterpret_cast<V*>(dst);
  const auto* from = reinterpret_cast<const V*>(src);
  for (std::size_t base = threadIdx.x; base < count; base += kUnroll * blockDim.x) {
    V v[kUnroll];
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) {
      const std::size_t i = base + u * blockDim.x;
      if (i < count) v[u] = from[i];
    }
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) {
      const std::size_t i = base + u * blockDim.x;
      if (i < count) to[i] = v[u];
    }
  }
}

__global__ void deliver_kernel(Delivery d) {
  if (d.bytes) {
    char* dst = static_cast<char*>(d.dst);
    const char* src = static_cast<const char*>(d.src);
    const std::uintptr_t align =
        reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) | d.bytes;
    if (align % 16 == 0)
      block_copy<uint4>(dst, src, d.bytes);
    else if (align % 8 == 0)
      block_copy<std::uint64_t>(dst, src, d.bytes);
    else if (align % 4 == 0)
      block_copy<std::uint32_t>(dst, src, d.bytes);
    else
      block_copy<unsigned char>(dst, src, d.bytes);
  }
  // The block's stores happen before thread 0's release (the barrier orders them), so whoever
  // sees the signal or the mark sees all of the data.
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (d.word) (void)apply_word_op(d.word, 8, d.op, d.operand, 0, dev::Order::AcqRel);
  if (d.done) dev::atomic_store(d.done, d.mark, dev::Order::Release);
}

}  // namespace

void load_stream_op_kernels(int device) {
  // With lazy module loading (CUDA's default) a kernel's code is loaded at its first launch, and
  // loading waits for the kernels already running. The proxy launches these kernels while an
  // application kernel spins waiting for the signal they apply: loaded lazily, neither would ever
  // finish. Asking for the functions' attributes loads them now.
  cudaFuncAttributes attr{};
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, word_atomic_kernel<std::uint32_t>),
                  "loading the word_atomic kernel (32-bit)");
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, word_atomic_kernel<std::uint64_t>),
                  "loading the word_atomic kernel (64-bit)");
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, deliver_kernel),
                  "loading the deliver kernel");
}

cudaError_t launch_word_atomic_kernel(void* word, unsigned width, WordOp op, std::uint64_t operand,
                                      std::uint64_t expected, std::uint64_t* old,
                                      cudaStream_t stream) {
  if (width == 4)
    word_atomic_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint32_t*>(word), op,
                                            static_cast<std::uint32_t>(operand),
                                            static_cast<std::uint32_t>(expected), old);
  else
    word_atomic_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint64_t*>(word), op, operand,
                                            expected, old);
  return cudaGetLastError();
}

cudaError_t launch_deliver_kernel(const Delivery& d, cudaStream_t stream) {
  // One thread suffices for the signal and mark alone.
  deliver_kernel<<<1, d.bytes ? kDeliverThreads : 1, 0, stream>>>(d);
  return cudaGetLastError();
}

}  // namespace gnio::platform
