// Reducing collective kernels of element type gnio::half (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_f16(RedOp op, const CollLaunch& l) {
  launch_arith<gnio::half>(op, l);
}

}  // namespace gnio::detail
