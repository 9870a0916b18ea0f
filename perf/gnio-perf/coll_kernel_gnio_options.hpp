// gnio-perf coll-kernel's command line: its options (KernelCollOptions), parsed and described for
// the help in coll_kernel_gnio_options.cpp (plain C++; coll_kernel_gnio.cpp, which nvcc compiles,
// includes this).
#pragma once

#include "gnio/coll.hpp"
#include "harness/driver.hpp"

namespace gnio::perf {

/// Options of the coll-kernel subcommand, as parsed from the command line.
struct KernelCollOptions {
  CollAlgo algo = CollAlgo::Auto;  ///< --algo
  bool warp = false;               ///< --coop warp: one warp per rank instead of a block
  unsigned reps = 0;               ///< --reps (0: default)
};

/// Adds coll-kernel's own options to the driver's command line, parsed into `opts`.
void add_coll_kernel_options(OptionList& options, KernelCollOptions& opts);

}  // namespace gnio::perf
