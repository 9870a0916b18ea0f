// The host collectives' settings: the GNIO_COLL_* variables (CollConfig, read once per
// communicator) and forced algorithms (GNIO_ALGO and coll_set_algorithm's spec, AlgoTable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gnio/coll.hpp"

namespace gnio::detail {

/// Does collective `k` have algorithm `a`?
inline bool kind_has(CollKind k, CollAlgo a) {
  switch (a) {
    case CollAlgo::Auto:
    case CollAlgo::Ring: return true;
    case CollAlgo::LL:
    case CollAlgo::OneShot: return k != CollKind::AllToAllV;
    case CollAlgo::TwoShot: return k != CollKind::ReduceScatter && k != CollKind::AllToAllV;
  }
  return false;
}

/// The forced algorithm of every collective (Auto = choose by size).
struct AlgoTable {
  CollAlgo forced[kCollKindCount] = {};
};

/// Parses an algorithm spec ("ring", "allreduce:ll,allgather:ring", ...); `source` names it in
/// errors (InvalidArgument).
AlgoTable parse_algorithms(const std::string& spec, const char* source);

/// GNIO_COLL_* settings, read once per communicator.
struct CollConfig {
  std::size_t scratch = 0;
  std::size_t staging = 0;
  unsigned depth = 2;
  unsigned channels = 1;
  unsigned blocks = 0;
  unsigned threads = 0;
  std::uint64_t ll_max = 0;
  std::uint64_t oneshot_max = 0;
  std::uint64_t remote_oneshot_max = 0;
  enum class Hier { Auto, On, Off } hier = Hier::Auto;
  std::uint64_t hier_min = 0;
};

/// Reads the GNIO_COLL_* variables (InvalidArgument for values out of range).
CollConfig read_config();

}  // namespace gnio::detail
