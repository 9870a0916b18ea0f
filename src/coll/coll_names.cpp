// The names of the collectives' vocabulary in messages and logs: data types, operators,
// algorithms and kinds (gnio/coll.hpp's to_string overloads).
#include <cstddef>
#include <iterator>

#include "base/enum_names.hpp"
#include "gnio/coll.hpp"

namespace gnio {

namespace {
// Each table lists its enumeration's values in order; the checks catch a value added to the
// enumeration without its name.
constexpr const char* kDataTypeNames[] = {"f32", "f16", "bf16",   "f64",   "i32",
                                          "i64", "u8",  "f8e4m3", "f8e5m2"};
static_assert(std::size(kDataTypeNames) == std::size_t{kDataTypeCount});
constexpr const char* kRedOpNames[] = {"sum", "prod", "min", "max", "and", "or", "xor"};
static_assert(std::size(kRedOpNames) == std::size_t{kRedOpCount});
constexpr const char* kAlgoNames[] = {"auto", "ll", "oneshot", "twoshot", "ring"};
static_assert(std::size(kAlgoNames) == std::size_t{kCollAlgoCount});
constexpr const char* kKindNames[] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                      "reduce",    "alltoall",       "alltoallv"};
static_assert(std::size(kKindNames) == std::size_t{kCollKindCount});
}  // namespace

const char* to_string(DataType t) noexcept {
  return enum_name(t, kDataTypeNames);
}

const char* to_string(RedOp op) noexcept {
  return enum_name(op, kRedOpNames);
}

const char* to_string(CollAlgo a) noexcept {
  return enum_name(a, kAlgoNames);
}

const char* to_string(CollKind k) noexcept {
  return enum_name(k, kKindNames);
}

}  // namespace gnio
