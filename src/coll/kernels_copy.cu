// Kernels of the bitwise operators (any integer type, reduced as bytes), of the data-movement
// collectives and of alltoallv (see coll_kernels.hpp).
#include <cstdint>
#include <cstring>

#include "coll/coll_kernels.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace gnio::detail {

void coll_launch_bits(RedOp op, const CollLaunch& l) {
  switch (op) {
    case RedOp::BitAnd: launch_coll<std::uint8_t, op::BitAnd>(l); break;
    case RedOp::BitOr: launch_coll<std::uint8_t, op::BitOr>(l); break;
    default: launch_coll<std::uint8_t, op::BitXor>(l); break;
  }
}

void coll_launch_copy(const CollLaunch& l) {
  if (l.args.kind != CollKind::AllToAllV) {
    launch_coll<std::uint8_t, CopyOp>(l);
    return;
  }
  CollA2avKernel k;
  k.cc = l.cc;
  k.args = l.args;
  std::memset(k.table, 0, sizeof(k.table));
  std::memcpy(k.table, l.a2av,
              sizeof(std::uint64_t) * 4 * static_cast<std::size_t>(l.cc.team.size));
  launch(l.stream, dims_for_kernel<CollA2avKernel>(l), k);
}

bool coll_stream_capturing(StreamRef stream) {
#if defined(__CUDACC__)
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
