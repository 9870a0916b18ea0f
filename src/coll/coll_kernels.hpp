// The kernels behind the host collectives (internal). One kernel per (element type, operator,
// algorithm) for the reducing collectives and per algorithm for the data-movement collectives
// (each kernel holds one algorithm, so each gets its own register allocation). They are
// instantiated explicitly, one element type per translation unit (kernels_*.cu, compiled by nvcc
// when the cuda backend is built; the same files are included by host_kernels_*.cpp otherwise), and
// reached through plain functions so that C++ and CUDA translation units link against each other
// without sharing template types.
#pragma once

#include <cstdint>

#include "gnio/device/coll.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"

namespace gnio::detail {

/// Most ranks of an alltoallv issued from the host (its counts travel as kernel arguments).
inline constexpr int kMaxAlltoallvRanks = 64;

/// One kernel launch of a host collective.
struct CollLaunch {
  CollComm cc;
  CollArgs args;  ///< algo resolved (never Auto)
  LaunchDims dims;
  StreamRef stream{static_cast<CUstream_st*>(nullptr)};
  /// Alltoallv: send counts, send displs, recv counts, recv displs (elements), kMaxAlltoallvRanks
  /// entries each, packed at [0, 4 * team size).
  const std::uint64_t* a2av = nullptr;
};

/// The kernel of one algorithm: every block is one worker of the call.
template <class T, class Op, CollAlgo kAlgo>
struct CollKernel {
  CollComm cc;
  CollArgs args;
  GNIO_HD void operator()() const {
    (void)cc.run_algo<Block, T, Op, kAlgo>(args, dev::block(), dev::grid_size(),
                                           CallSite("gnio collective", 0));
  }
};

/// Alltoallv's kernel carries its count table by value.
struct CollA2avKernel {
  CollComm cc;
  CollArgs args;
  std::uint64_t table[4 * kMaxAlltoallvRanks];
  GNIO_HD void operator()() const {
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
#endif

/// The launch shape for kernel F: threads per block clamped to what F can run with. (Only the
/// number of blocks must agree between ranks; threads per block are this rank's business.)
template <class F>
inline LaunchDims dims_for_kernel(const CollLaunch& l) {
  LaunchDims d = l.dims;
#if defined(__CUDACC__)
  if (!l.stream.is_host()) {
    const unsigned most = max_block_threads<F>();
    if (most >= 32 && d.block > most) d.block = most;
  }
#endif
  return d;
}

template <class T, class Op, CollAlgo kAlgo>
inline void launch_algo(const CollLaunch& l) {
  using K = CollKernel<T, Op, kAlgo>;
  launch(l.stream, dims_for_kernel<K>(l), K{l.cc, l.args});
}

/// Launches the kernel of l.args.algo (resolved) for element type T and operator Op.
template <class T, class Op>
inline void launch_coll(const CollLaunch& l) {
  switch (l.args.algo) {
    case CollAlgo::LL: launch_algo<T, Op, CollAlgo::LL>(l); break;
    case CollAlgo::OneShot: launch_algo<T, Op, CollAlgo::OneShot>(l); break;
    case CollAlgo::TwoShot: launch_algo<T, Op, CollAlgo::TwoShot>(l); break;
    default: launch_algo<T, Op, CollAlgo::Ring>(l); break;
  }
}

/// Launches the reducing kernel of element type T for `op` (arithmetic operators only).
template <class T>
inline void launch_arith(RedOp op, const CollLaunch& l) {
  switch (op) {
    case RedOp::Sum: launch_coll<T, op::Sum>(l); break;
    case RedOp::Prod: launch_coll<T, op::Prod>(l); break;
    case RedOp::Min: launch_coll<T, op::Min>(l); break;
    case RedOp::Max: launch_coll<T, op::Max>(l); break;
    default: break;  // rejected before (bitwise operators go to coll_launch_bits)
  }
}

// One function per translation unit (kernels_*.cu).
void coll_launch_f32(RedOp op, const CollLaunch& l);
void coll_launch_f64(RedOp op, const CollLaunch& l);
void coll_launch_f16(RedOp op, const CollLaunch& l);
void coll_launch_bf16(RedOp op, const CollLaunch& l);
void coll_launch_fp8(DataType type, RedOp op, const CollLaunch& l);
void coll_launch_int(DataType type, RedOp op, const CollLaunch& l);
/// Bitwise operators on any integer type (as bytes), the data-movement collectives, alltoallv.
void coll_launch_bits(RedOp op, const CollLaunch& l);
void coll_launch_copy(const CollLaunch& l);
/// True when `stream` is a CUDA stream being captured into a graph.
bool coll_stream_capturing(StreamRef stream);

}  // namespace gnio::detail
