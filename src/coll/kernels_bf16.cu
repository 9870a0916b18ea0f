// Reducing collective kernels of element type gnio::bfloat16 (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_bf16(RedOp op, const CollLaunch& l) {
  launch_arith<gnio::bfloat16>(op, l);
}

}  // namespace gnio::detail
