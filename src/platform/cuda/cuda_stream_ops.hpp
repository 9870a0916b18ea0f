// The kernels behind CudaBackend::word_atomic, deliver, deliver_batch and the delivery agent
// (cuda_stream_ops.cu), for
// the backend's own use.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "platform/backend.hpp"

namespace gnio::platform {

/// Most data deliver() moves with its kernel (threads reading the host buffer over the bus);
/// more goes through the copy engine, followed by the kernel for the signal and mark.
inline constexpr std::size_t kDeliverKernelBytes = std::size_t{64} << 10;

/// Loads these kernels on `device` (current), so that launching them never waits for the kernels
/// already running (lazy module loading; cuda_stream_ops.cu).
void load_stream_op_kernels(int device);
/// Queues word_atomic's one-thread kernel on `stream` (the GPU of `word` current); returns the
/// launch's error.
cudaError_t launch_word_atomic_kernel(void* word, unsigned width, WordOp op, std::uint64_t operand,
                                      std::uint64_t expected, std::uint64_t* old,
                                      cudaStream_t stream);
/// Queues deliver's kernel on `stream`: copies d.bytes (at most kDeliverKernelBytes; 0 when the
/// copy engine moved them) from d.src to d.dst, then applies the signal and stores the mark.
cudaError_t launch_deliver_kernel(const Delivery& d, cudaStream_t stream);
/// Queues the batch kernel of deliver_batch on `stream`: `count` (1 to kMaxDeliveryBatch)
/// deliveries of at most kMaxBatchedDeliveryBytes each, passed by value (the array may be reused
/// once this returns).
cudaError_t launch_deliver_batch_kernel(const Delivery* d, std::size_t count, cudaStream_t stream);
/// Queues the delivery agent's kernel (one block of kAgentThreads) on `stream`; it returns once the
/// host sets ring->stop and everything published is applied.
cudaError_t launch_delivery_agent_kernel(DeliveryRing* ring, AgentScratch* scratch,
                                         cudaStream_t stream);

}  // namespace gnio::platform
