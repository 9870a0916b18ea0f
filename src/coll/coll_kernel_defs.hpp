// The definitions behind coll_kernels.hpp's launch_set, for the generated kernel translation
// units only (coll_kernels.cu.in): everything here instantiates device code.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "coll/coll_kernels.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/log.hpp"

namespace gnio::detail {

/// Element type and operators of each kernel set.
template <KernelSet S>
struct KernelSetTraits;
#define GNIO_KERNEL_SET(set, type, ops)    \
  template <>                              \
  struct KernelSetTraits<KernelSet::set> { \
    using T = type;                        \
    using Ops = ops;                       \
  };
GNIO_KERNEL_SET(F32, float, ArithOps)
GNIO_KERNEL_SET(F64, double, ArithOps)
GNIO_KERNEL_SET(F16, half, ArithOps)
GNIO_KERNEL_SET(BF16, bfloat16, ArithOps)
GNIO_KERNEL_SET(E4M3, fp8_e4m3, ArithOps)
GNIO_KERNEL_SET(E5M2, fp8_e5m2, ArithOps)
GNIO_KERNEL_SET(I32, std::int32_t, ArithOps)
GNIO_KERNEL_SET(I64, std::int64_t, ArithOps)
GNIO_KERNEL_SET(U8, std::uint8_t, ArithOps)
GNIO_KERNEL_SET(Bits, std::uint8_t, BitOps)
GNIO_KERNEL_SET(Copy, std::uint8_t, CopyOp)
#undef GNIO_KERNEL_SET

/// The kernel of one algorithm: every block is one worker of the call.
template <class T, class Ops, CollAlgo kAlgo>
struct CollKernel {
  CollComm cc;
  CollArgs args;
  GNIO_HD_INLINE void operator()() const {
    (void)cc.run_algo<Block, T, Ops, kAlgo>(args, dev::block(), dev::grid_size(),
                                            CallSite("gnio collective", 0));
  }
};

/// Alltoallv's kernel carries its count table by value.
struct CollA2avKernel {
  CollComm cc;
  CollArgs args;
  std::uint64_t table[4 * kMaxAlltoallvRanks];
  GNIO_HD_INLINE void operator()() const {
    CollArgs a = args;
    a.a2av = table;
    (void)cc.run_algo<Block, std::uint8_t, CopyOp, CollAlgo::Ring>(
        a, dev::block(), dev::grid_size(), CallSite("gnio collective", 0));
  }
};

#if defined(__CUDACC__)
/// The most threads per block kernel F can be launched with on this device (its register use
/// decides; a multiple of 32), queried once.
template <class F>
unsigned max_block_threads() {
  static const unsigned v = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel_entry<F>) != cudaSuccess) {
      (void)cudaGetLastError();
      return 1024u;
    }
    return static_cast<unsigned>(attr.maxThreadsPerBlock) / 32 * 32;
  }();
  return v;
}

/// How many blocks of kernel F with `block` threads one SM of this device keeps resident (F's
/// registers and shared memory decide), queried once per block size; at least 1.
template <class F>
unsigned resident_blocks_per_sm(unsigned block, std::size_t shared_bytes) {
  static std::atomic<int> known[33];  // by block / 32; 0: not asked yet
  const unsigned at = std::min(block / 32, 32u);
  int n = known[at].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel_entry<F>, static_cast<int>(block),
                                                      shared_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 1;
    }
    n = std::max(n, 1);
    known[at].store(n, std::memory_order_relaxed);
  }
  return static_cast<unsigned>(n);
}
#endif

/// The launch shape for kernel F: threads per block clamped to what F can run with, and on a GPU
/// several ranks share, blocks capped so that all their grids are resident together (GpuShare).
/// Only the number of blocks must agree between ranks: the cap depends on F, its threads, the
/// job's GPUs and how many share one, all the same on every rank; threads per block are this
/// rank's business.
template <class F>
inline LaunchDims dims_for_kernel(const CollLaunch& l) {
  LaunchDims d = l.dims;
#if defined(__CUDACC__)
  if (!l.stream.is_host()) {
    const unsigned most = max_block_threads<F>();
    if (most >= 32 && d.block > most) d.block = most;
    if (l.gpu.ranks > 1) {
      const unsigned limit =
          resident_grid_limit(l.gpu, resident_blocks_per_sm<F>(d.block, d.shared_bytes));
      if (d.grid > limit) {
        GNIO_TRACE(Coll, "  %u blocks of %u threads capped at %u: %u ranks share a GPU", d.grid,
                   d.block, limit, l.gpu.ranks);
        d.grid = limit;
      }
    }
  }
#endif
  return d;
}

template <KernelSet S, CollAlgo A>
void launch_set(const CollLaunch& l) {
  if constexpr (S == KernelSet::Copy && A == CollAlgo::Ring) {
    if (l.args.kind == CollKind::AllToAllV) {
      CollA2avKernel k;
      k.cc = l.cc;
      k.args = l.args;
      std::memset(k.table, 0, sizeof(k.table));
      std::memcpy(k.table, l.a2av,
                  sizeof(std::uint64_t) * 4 * static_cast<std::size_t>(l.cc.team.size));
      launch(l.stream, dims_for_kernel<CollA2avKernel>(l), k);
      return;
    }
  }
  using K = CollKernel<typename KernelSetTraits<S>::T, typename KernelSetTraits<S>::Ops, A>;
  launch(l.stream, dims_for_kernel<K>(l), K{l.cc, l.args});
}

}  // namespace gnio::detail
