// gnio-perf msgrate's command line: its options (RateOptions), parsed and described for the help
// in msgrate_gnio_options.cpp (plain C++; msgrate_gnio.cpp, which nvcc compiles, includes this).
#pragma once

#include "harness/driver.hpp"

namespace gnio::perf {

/// The operation every sender thread issues.
enum class RateOp { PutSignal, Put, Signal };

/// Options of the msgrate subcommand, as parsed from the command line.
struct RateOptions {
  RateOp op = RateOp::PutSignal;  ///< --op
  unsigned grid = 0;              ///< --grid (0: default)
  unsigned block = 0;             ///< --block (0: default)
  unsigned reps = 0;              ///< --reps (0: default)
};

/// Adds msgrate's own options to the driver's command line, parsed into `opts`.
void add_msgrate_options(OptionList& options, RateOptions& opts);

}  // namespace gnio::perf
