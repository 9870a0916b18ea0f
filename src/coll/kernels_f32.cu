// Reducing collective kernels of element type float (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_f32(RedOp op, const CollLaunch& l) {
  launch_arith<float>(op, l);
}

}  // namespace gnio::detail
