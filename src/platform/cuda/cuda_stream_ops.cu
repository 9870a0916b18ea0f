// The kernels behind CudaBackend::word_atomic, deliver, deliver_batch and the delivery agent: the
// only way host code can update a word of device memory atomically with respect to kernels (the
// host cannot address device memory, and a copy into it is not atomic). Their stream order after
// the proxy's data copies (the agent: the stream marks its entries wait for) is what makes a
// proxied signal visible only after its data.
#include <cuda_runtime.h>

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_stream_ops.hpp"
#include "platform/delivery_agent.hpp"
#include "platform/word_op.hpp"

namespace gnio::platform {
namespace {

constexpr unsigned kDeliverThreads = 512;
constexpr unsigned kDeliverBatchWarps = 8;

template <class T>
__global__ void word_atomic_kernel(T* word, WordOp op, T operand, T expected, std::uint64_t* old) {
  const std::uint64_t before =
      apply_word_op(word, sizeof(T), op, operand, expected, dev::Order::AcqRel);
  if (old) dev::atomic_store(old, before, dev::Order::Release);
}

__global__ void deliver_kernel(Delivery d) {
  if (d.bytes) copy_delivery_bytes(d.dst, d.src, d.bytes, threadIdx.x, blockDim.x);
  // The block's stores happen before thread 0's release (the barrier orders them), so whoever
  // sees the signal or the mark sees all of the data.
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (d.word) (void)apply_word_op(d.word, 8, d.op, d.operand, 0, dev::Order::AcqRel);
  if (d.done) dev::atomic_store(d.done, d.mark, dev::Order::Release);
}

/// deliver_batch's work, passed by value (a kernel parameter; 2.6 KB of the 4 KB allowed).
struct DeliveryBatch {
  struct Item {
    void* dst;
    const void* src;
    std::uint64_t* word;
    std::uint64_t operand;
    std::uint32_t bytes;
    WordOp op;
  };
  Item items[kMaxDeliveryBatch];
  std::uint32_t count;
  std::uint64_t* done;  // the last delivery's mark word and mark (marks only grow)
  std::uint64_t mark;
};
static_assert(sizeof(DeliveryBatch) <= 4000, "a kernel parameter holds at most 4 KB");

/// One warp per delivery's data (they are small and independent: their loads over the bus are
/// all in flight at once), then thread 0 applies the signals in order and stores the mark.
__global__ void deliver_batch_kernel(DeliveryBatch b) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (unsigned i = warp; i < b.count; i += warps)
    if (b.items[i].bytes)
      copy_delivery_bytes(b.items[i].dst, b.items[i].src, b.items[i].bytes, lane, 32);
  __syncthreads();
  if (threadIdx.x != 0) return;
  apply_signals_after_data(b.items, b.count);
  if (b.done) dev::atomic_store(b.done, b.mark, dev::Order::Release);
}

struct BlockBarrier {
  __device__ void operator()() const { __syncthreads(); }
};

__global__ void __launch_bounds__(kAgentThreads)
    delivery_agent_kernel(DeliveryRing* ring, AgentScratch* scratch) {
  run_delivery_agent(ring, threadIdx.x, blockDim.x, BlockBarrier{}, scratch);
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
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, delivery_agent_kernel),
                  "loading the delivery agent's kernel");
  GNIO_CUDA_CHECK(device, cudaFuncGetAttributes(&attr, deliver_batch_kernel),
                  "loading the deliver kernel for batches");
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

cudaError_t launch_deliver_batch_kernel(const Delivery* d, std::size_t count, cudaStream_t stream) {
  DeliveryBatch b{};
  b.count = static_cast<std::uint32_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    b.items[i] = DeliveryBatch::Item{
        d[i].dst, d[i].src, d[i].word, d[i].operand, static_cast<std::uint32_t>(d[i].bytes),
        d[i].op};
    if (d[i].done) {
      b.done = d[i].done;
      b.mark = d[i].mark;
    }
  }
  // At most 8 warps: the kernel must find room beside a persistent kernel that holds a block on
  // every SM (a 1024-thread block did not, rma_persistent_test).
  const unsigned warps =
      static_cast<unsigned>(count < kDeliverBatchWarps ? count : kDeliverBatchWarps);
  deliver_batch_kernel<<<1, 32 * warps, 0, stream>>>(b);
  return cudaGetLastError();
}

cudaError_t launch_delivery_agent_kernel(DeliveryRing* ring, AgentScratch* scratch,
                                         cudaStream_t stream) {
  delivery_agent_kernel<<<1, kAgentThreads, 0, stream>>>(ring, scratch);
  return cudaGetLastError();
}

}  // namespace gnio::platform
