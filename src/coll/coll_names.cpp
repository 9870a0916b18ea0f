// The names of the collectives' vocabulary in messages and logs: data types, operators,
// algorithms and kinds (gnio/coll.hpp's to_string overloads).
#include "gnio/coll.hpp"

namespace gnio {

namespace {
constexpr const char* kKindNames[kCollKindCount] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall", "alltoallv"};
constexpr const char* kAlgoNames[kCollAlgoCount] = {"auto", "ll", "oneshot", "twoshot", "ring"};
}  // namespace

const char* to_string(DataType t) noexcept {
  switch (t) {
    case DataType::F32: return "f32";
    case DataType::F16: return "f16";
    case DataType::BF16: return "bf16";
    case DataType::F64: return "f64";
    case DataType::I32: return "i32";
    case DataType::I64: return "i64";
    case DataType::U8: return "u8";
    case DataType::F8E4M3: return "f8e4m3";
    case DataType::F8E5M2: return "f8e5m2";
  }
  return "?";
}

const char* to_string(RedOp op) noexcept {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Min: return "min";
    case RedOp::Max: return "max";
    case RedOp::BitAnd: return "and";
    case RedOp::BitOr: return "or";
    case RedOp::BitXor: return "xor";
  }
  return "?";
}

const char* to_string(CollAlgo a) noexcept {
  const int i = static_cast<int>(a);
  return i >= 0 && i < kCollAlgoCount ? kAlgoNames[i] : "?";
}

const char* to_string(CollKind k) noexcept {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kCollKindCount ? kKindNames[i] : "?";
}

}  // namespace gnio
