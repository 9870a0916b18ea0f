// nvshmem-perf's kernels: the measurements of gnio-perf rma (perf/harness/rma_suite.hpp),
// written against NVSHMEM 3.4's device API, plus the fill/check kernels. Plain CUDA launches on
// one stream.
#pragma once

#include <cstdint>

#include "harness/rma_model.hpp"
#include "harness/rma_suite.hpp"

struct CUstream_st;

namespace gnio::perf::nvshmem_bench {

/// What the kernels need: symmetric buffers (NVSHMEM addresses), private buffers, the stream.
struct KernelContext {
  std::uint8_t* sym = nullptr;       ///< nvshmem_malloc'ed: same address names the peer's copy
  std::uint8_t* priv = nullptr;      ///< cudaMalloc'ed
  std::uint64_t* signals = nullptr;  ///< nvshmem_malloc'ed SignalLayout words
  SignalLayout layout;
  std::uint64_t* errors = nullptr;  ///< device word: mismatches the atomics kernel counted
  CUstream_st* stream = nullptr;
  unsigned util_blocks = 1024;  ///< fill/check kernels: at most this many blocks of 256
};

/// Queues the kernel of `l` (latency, bandwidth or atomics). Throws gnio::Error on a launch error.
void launch_rma(const KernelContext& ctx, const RmaLaunch& l);
/// Queues a kernel writing the pattern of `seed` (or the poison) into [0, bytes) of `buf`.
void launch_fill(const KernelContext& ctx, std::uint8_t* buf, std::uint64_t bytes,
                 std::uint64_t seed, bool poison);
/// Queues a kernel adding the wrong bytes of `buf` (count_wrong_share) to `*result`.
void launch_count_wrong(const KernelContext& ctx, const std::uint8_t* buf, std::uint64_t bytes,
                        std::uint64_t guard, std::uint64_t seed, std::uint64_t* result);

}  // namespace gnio::perf::nvshmem_bench
