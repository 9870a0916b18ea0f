// The kernel behind CudaBackend::word_atomic (cuda_word_atomic.cu), for the backend's own use.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "platform/backend.hpp"

namespace gnio::platform {

/// Loads word_atomic's kernels on `device` (current), so that launching them never waits for
/// the kernels already running (lazy module loading; cuda_word_atomic.cu).
void load_word_atomic_kernels(int device);
/// Queues word_atomic's one-thread kernel on `stream` (the GPU of `word` current); returns the
/// launch's error (cuda_word_atomic.cu).
cudaError_t launch_word_atomic_kernel(void* word, unsigned width, WordOp op, std::uint64_t operand,
                                      std::uint64_t expected, std::uint64_t* old,
                                      cudaStream_t stream);

}  // namespace gnio::platform
