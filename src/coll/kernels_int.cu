// Reducing collective kernels of the integer types, arithmetic operators (see coll_kernels.hpp).
#include <cstdint>

#include "coll/coll_kernels.hpp"

namespace gnio::detail {

void coll_launch_int(DataType type, RedOp op, const CollLaunch& l) {
  switch (type) {
    case DataType::I32: launch_arith<std::int32_t>(op, l); break;
    case DataType::I64: launch_arith<std::int64_t>(op, l); break;
    default: launch_arith<std::uint8_t>(op, l); break;
  }
}

}  // namespace gnio::detail
