// gnio-perf coll's command line: its options (CollOptions), their parsing (names of collectives,
// types, operators and algorithms, nccl-tests' among them) and their help, in
// coll_gnio_options.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnio/coll.hpp"
#include "harness/driver.hpp"

namespace gnio::perf {

/// Options of the coll subcommand, as parsed from the command line.
struct CollOptions {
  std::vector<CollKind> colls;
  std::vector<DataType> types;
  std::vector<RedOp> ops;
  std::string algo;  ///< --algo, handed to coll_set_algorithm; empty: GNIO_ALGO's (auto by default)
  int inplace = 2;   ///< --inplace: 0 out of place, 1 in place, 2 both
  int root = 0;      ///< --root
  bool check = true;                   ///< -c
  std::optional<std::uint32_t> graph;  ///< -G: calls per graph launch (0: eager)
  unsigned reps = 0;                   ///< --reps (0: default)
  bool private_buffers = false;        ///< --mem priv
  bool vs_nccl = false;                ///< --vs-nccl
};

/// Adds coll's own options to the driver's command line, parsed into `opts`.
void add_coll_options(OptionList& options, CollOptions& opts);

}  // namespace gnio::perf
