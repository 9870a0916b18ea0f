// gnio-perf msg's command line: its options (MsgOptions), parsed and described for the help in
// msg_gnio_options.cpp (plain C++; msg_gnio.cpp, which nvcc compiles, includes this).
#pragma once

#include <cstdint>

#include "gnio/channel.hpp"
#include "harness/driver.hpp"

namespace gnio::perf {

/// Options of the msg subcommand, as parsed from the command line.
struct MsgOptions {
  bool lat = true, bw = true, rate = true;               ///< --mode
  unsigned channels = 0;                                 ///< --channels (0: default)
  std::uint32_t depth = 4;                               ///< --depth
  std::uint64_t slot = 0;                                ///< --slot (0: default)
  std::uint64_t ll_max = gnio::ChannelOptions{}.ll_max;  ///< --ll-max
  unsigned reps = 0;                                     ///< --reps (0: default)
};

/// Adds msg's own options to the driver's command line, parsed into `opts`.
void add_msg_options(OptionList& options, MsgOptions& opts);

}  // namespace gnio::perf
