// Reducing collective kernels of the 8-bit float types (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_fp8(DataType type, RedOp op, const CollLaunch& l) {
  if (type == DataType::F8E4M3)
    launch_arith<fp8_e4m3>(op, l);
  else
    launch_arith<fp8_e5m2>(op, l);
}

}  // namespace gnio::detail
