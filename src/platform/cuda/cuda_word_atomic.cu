// CudaBackend::word_atomic: a one-thread kernel, the only way host code can update a word of
// device memory atomically with respect to kernels (the host cannot address device memory, and
// a copy into it is not atomic). Its stream order after the proxy's data copies is what makes a
// proxied signal visible only after its data.
#include <cuda_runtime.h>

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_word_atomic.hpp"

namespace gnio::platform {
namespace {

template <class T>
__global__ void word_atomic_kernel(T* word, WordOp op, T operand, T expected, std::uint64_t* old) {
  T before{};
  switch (op) {
    case WordOp::Load: before = dev::atomic_load(word, dev::Order::Acquire); break;
    case WordOp::Store:
    case WordOp::Exchange: before = dev::atomic_exchange(word, operand, dev::Order::AcqRel); break;
    case WordOp::Add: before = dev::atomic_fetch_add(word, operand, dev::Order::AcqRel); break;
    case WordOp::CompareSwap:
      before = dev::atomic_compare_swap(word, expected, operand, dev::Order::AcqRel);
      break;
  }
  if (old) dev::atomic_store(old, static_cast<std::uint64_t>(before), dev::Order::Release);
}

}  // namespace

void load_word_atomic_kernels(int device) {
  // With lazy module loading (CUDA's default) a kernel's code is loaded at its first launch, and
  // loading waits for the kernels already running. The proxy launches this kernel while an
  // application kernel spins waiting for the signal it applies: loaded lazily, neither would ever
  // finish. Asking for the functions' attributes loads them now.
  cudaFuncAttributes attr{};
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, word_atomic_kernel<std::uint32_t>),
                  "loading the word_atomic kernel (32-bit)");
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, word_atomic_kernel<std::uint64_t>),
                  "loading the word_atomic kernel (64-bit)");
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

}  // namespace gnio::platform
