// The kernels behind the host collectives (internal). One kernel per (element type, operator) for
// the reducing collectives and one for the data-movement collectives, each running every
// algorithm (CollComm::run dispatches at run time). They are instantiated explicitly, one element
// type per translation unit (kernels_*.cu, compiled by nvcc when the cuda backend is built; the
// same files are included by host_kernels.cpp otherwise), and reached through plain functions so
// that C++ and CUDA translation units link against each other without sharing template types.
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

/// The kernel: every block is one worker of the call.
template <class T, class Op>
struct CollKernel {
  CollComm cc;
  CollArgs args;
  GNIO_HD void operator()() const {
    (void)cc.run<Block, T, Op>(args, dev::block(), dev::grid_size(),
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
    (void)cc.run<Block, std::uint8_t, CopyOp>(a, dev::block(), dev::grid_size(),
                                              CallSite("gnio collective", 0));
  }
};

template <class T, class Op>
inline void launch_coll(const CollLaunch& l) {
  launch(l.stream, l.dims, CollKernel<T, Op>{l.cc, l.args});
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
