// Reducing collective kernels of element type double (see coll_kernels.hpp).
#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_f64(RedOp op, const CollLaunch& l) {
  launch_arith<double>(op, l);
}

}  // namespace gnio::detail
