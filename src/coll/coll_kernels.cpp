// Which kernel runs a host collective, and the launch of it (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

#include "base/fail.hpp"

#if defined(GNIO_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace gnio::detail {
namespace {

/// GNIO_COLL_KERNEL_SETS: cmake/GnioCollKernels.cmake defines GNIO_COLL_SET_<NAME> for every
/// set, 1 where it compiled the set and 0 where not (for this file alone).
constexpr bool kBuilt[kKernelSetCount] = {
#define GNIO_SET_BUILT(macro) GNIO_SET_BUILT_I(macro)
#define GNIO_SET_BUILT_I(macro) (macro == 1)
    GNIO_SET_BUILT(GNIO_COLL_SET_F32),  GNIO_SET_BUILT(GNIO_COLL_SET_F64),
    GNIO_SET_BUILT(GNIO_COLL_SET_F16),  GNIO_SET_BUILT(GNIO_COLL_SET_BF16),
    GNIO_SET_BUILT(GNIO_COLL_SET_E4M3), GNIO_SET_BUILT(GNIO_COLL_SET_E5M2),
    GNIO_SET_BUILT(GNIO_COLL_SET_I32),  GNIO_SET_BUILT(GNIO_COLL_SET_I64),
    GNIO_SET_BUILT(GNIO_COLL_SET_U8),   GNIO_SET_BUILT(GNIO_COLL_SET_BITS),
    GNIO_SET_BUILT(GNIO_COLL_SET_COPY),
#undef GNIO_SET_BUILT_I
#undef GNIO_SET_BUILT
};

template <KernelSet S>
void launch_algorithm(const CollLaunch& l) {
  switch (l.args.algo) {
    case CollAlgo::LL: launch_set<S, CollAlgo::LL>(l); break;
    case CollAlgo::OneShot: launch_set<S, CollAlgo::OneShot>(l); break;
    case CollAlgo::TwoShot: launch_set<S, CollAlgo::TwoShot>(l); break;
    default: launch_set<S, CollAlgo::Ring>(l); break;
  }
}

}  // namespace

KernelSet kernel_set(CollKind kind, DataType type, RedOp op) {
  if (kind != CollKind::AllReduce && kind != CollKind::ReduceScatter && kind != CollKind::Reduce)
    return KernelSet::Copy;
  if (is_bitwise(op)) return KernelSet::Bits;
  switch (type) {
    case DataType::F32: return KernelSet::F32;
    case DataType::F64: return KernelSet::F64;
    case DataType::F16: return KernelSet::F16;
    case DataType::BF16: return KernelSet::BF16;
    case DataType::F8E4M3: return KernelSet::E4M3;
    case DataType::F8E5M2: return KernelSet::E5M2;
    case DataType::I32: return KernelSet::I32;
    case DataType::I64: return KernelSet::I64;
    default: return KernelSet::U8;
  }
}

const char* to_string(KernelSet set) {
  static constexpr const char* kNames[kKernelSetCount] = {
      "f32", "f64", "f16", "bf16", "e4m3", "e5m2", "i32", "i64", "u8", "bits", "copy"};
  const auto i = static_cast<unsigned>(set);
  return i < kKernelSetCount ? kNames[i] : "?";
}

bool kernel_set_built(KernelSet set) {
  const auto i = static_cast<unsigned>(set);
  return i < kKernelSetCount && kBuilt[i];
}

// Every set is referenced below; the linker needs only the ones this build compiled, because a
// set left out is never reached (the `if constexpr` drops its calls).
void launch_kernel(KernelSet set, const CollLaunch& l) {
  if (!kernel_set_built(set))
    fail(ErrorClass::Unsupported,
         "gnio was built without the '%s' collective kernels (GNIO_COLL_KERNEL_SETS)",
         to_string(set));
  switch (set) {
#define GNIO_SET_CASE(set)                                                                       \
  case KernelSet::set:                                                                           \
    if constexpr (kBuilt[static_cast<int>(KernelSet::set)]) launch_algorithm<KernelSet::set>(l); \
    break;
    GNIO_SET_CASE(F32)
    GNIO_SET_CASE(F64)
    GNIO_SET_CASE(F16)
    GNIO_SET_CASE(BF16)
    GNIO_SET_CASE(E4M3)
    GNIO_SET_CASE(E5M2)
    GNIO_SET_CASE(I32)
    GNIO_SET_CASE(I64)
    GNIO_SET_CASE(U8)
    GNIO_SET_CASE(Bits)
    GNIO_SET_CASE(Copy)
#undef GNIO_SET_CASE
  }
}

bool coll_stream_capturing(StreamRef stream) {
#if defined(GNIO_HAVE_CUDA)
  if (stream.is_host()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.cuda(), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
#else
  (void)stream;
  return false;
#endif
}

}  // namespace gnio::detail
