// gnio-perf msg's command line (msg_gnio_options.hpp): its options and
// the notes of its help, for the driver to parse.
#include "msg_gnio_options.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "harness/cli_options.hpp"

namespace gnio::perf {

void add_msg_options(OptionList& list, MsgOptions& o) {
  using Flag = bool MsgOptions::*;
  list.add(
      "--mode",
      [&o](const std::string& v) {
        const std::vector<Flag> on = parse_names<Flag>(v, "--mode",
                                                       {{"lat", {&MsgOptions::lat}},
                                                        {"bw", {&MsgOptions::bw}},
                                                        {"rate", {&MsgOptions::rate}}});
        for (Flag f : {&MsgOptions::lat, &MsgOptions::bw, &MsgOptions::rate})
          o.*f = std::find(on.begin(), on.end(), f) != on.end();
      },
      "lat, bw, rate (comma-separated; default all)", "LIST");
  add_count_option(list, "--depth", "--depth", o.depth, 1, 4096, "slots per channel (default 4)");
  add_size_option(list, "--slot", "--slot", o.slot, 1, std::uint64_t{1} << 30,
                  "--slot must be 1 B..1 GiB", "bytes per slot (default: GPU 1M, host 256K)");
  add_size_option(list, "--ll-max", "--ll-max", o.ll_max, 0, std::uint64_t{1} << 20,
                  "--ll-max must be 0..1 MiB",
                  "largest message sent as low-latency packets over peer\n"
                  "memory (default: GPU 8K, host 64; 0: none)");
  add_count_option(list, "--channels", "--channels", o.channels, 1, 1024,
                   "channels (blocks per side) of the rate mode (default: GPU 32, host 2)");
  add_count_option(list, "--reps", "--reps", o.reps, 1, 1000,
                   "timed kernels per point (default 5)");
  list.footer =
      "2 ranks; two-sided messages beside put_signal / put. Sizes: GPU -b 8 -e 64M -f 8, host\n"
      "-b 8 -e 1M -f 8; -n: iterations of small messages (GPU 200, host 50).";
}

}  // namespace gnio::perf
