// The kernels behind the host collectives (internal): how the host side (coll_enqueue.cpp)
// reaches them.
//
// Kernels come in sets: one set per element type with the arithmetic operators (the call's
// operator chosen at run time around each data loop), the bitwise operators on bytes, and the
// data-movement collectives. Each set has one kernel per algorithm, so that each algorithm gets
// its own register allocation. src/CMakeLists.txt generates one translation unit per set and
// group of algorithms (from coll_kernels.cu.in, compiled by nvcc with the cuda backend and as C++
// otherwise), so that a build spreads them over every core; each explicitly instantiates
// launch_set<S, A> for its algorithms. This header only declares them: translation units compiled
// by the C++ compiler (coll_enqueue.cpp) call them without seeing any device code.
#pragma once

#include <cstdint>

#include "coll/gpu_share.hpp"
#include "gnio/device/coll.hpp"
#include "gnio/device/coll_types.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"

namespace gnio::detail {

/// Most ranks of an alltoallv issued from the host (its counts travel as kernel arguments).
inline constexpr int kMaxAlltoallvRanks = 64;

/// One kernel launch of a host collective.
struct CollLaunch {
  CollComm cc;
  CollArgs args;  ///< algo resolved (never Auto); op: the reducing kinds' operator
  LaunchDims dims;
  GpuShare gpu;
  StreamRef stream{static_cast<CUstream_st*>(nullptr)};
  /// Alltoallv: send counts, send displs, recv counts, recv displs (elements), kMaxAlltoallvRanks
  /// entries each, packed at [0, 4 * team size).
  const std::uint64_t* a2av = nullptr;
};

/// The kernel sets (src/CMakeLists.txt's GNIO_COLL_KERNEL_SETS names them in lower case).
enum class KernelSet : std::uint8_t { F32, F64, F16, BF16, E4M3, E5M2, I32, I64, U8, Bits, Copy };
/// Number of KernelSet values.
inline constexpr int kKernelSetCount = 11;

/// The set whose kernel runs a call of `kind` on `type` with `op`.
KernelSet kernel_set(CollKind kind, DataType type, RedOp op);
/// The set's name as in GNIO_COLL_KERNEL_SETS ("f32", ..., "bits", "copy").
const char* to_string(KernelSet set);
/// True when this build compiled the kernels of `set` (GNIO_COLL_KERNEL_SETS).
bool kernel_set_built(KernelSet set);

/// Launches the kernel of set S for algorithm A (l.args.algo == A). Defined, and instantiated, in
/// the generated translation unit of S and A.
template <KernelSet S, CollAlgo A>
void launch_set(const CollLaunch& l);

/// Launches the kernel of `set` for l.args.algo; throws Error(Unsupported) when this build left
/// the set out.
void launch_kernel(KernelSet set, const CollLaunch& l);

/// True when `stream` is a CUDA stream being captured into a graph.
bool coll_stream_capturing(StreamRef stream);

}  // namespace gnio::detail
