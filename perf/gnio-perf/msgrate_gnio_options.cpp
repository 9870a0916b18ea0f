// gnio-perf msgrate's command line (msgrate_gnio_options.hpp): its options and
// the notes of its help, for the driver to parse.
#include "msgrate_gnio_options.hpp"

#include "harness/cli_options.hpp"

namespace gnio::perf {

void add_msgrate_options(OptionList& list, RateOptions& o) {
  add_choice_option(
      list, "--op", "--op", o.op,
      {{"put_signal", {RateOp::PutSignal}}, {"put", {RateOp::Put}}, {"signal", {RateOp::Signal}}},
      "the operation (default put_signal)");
  add_count_option(list, "--grid", "--grid", o.grid, 1, 65535,
                   "blocks of the sender's launch (default: GPU 132, host 2)")
      .value_name("G");
  add_count_option(list, "--block", "--block", o.block, 1, 1024,
                   "threads per block of the sender's launch (default: GPU 256, host 4)")
      .value_name("B");
  add_count_option(list, "--reps", "--reps", o.reps, 1, 1000, "timed kernels (default 5)");
  list.footer =
      "rank 0 -> rank 1, 8-byte operations from every thread of one kernel. -n OPS: operations\n"
      "per thread and kernel (default: GPU 1000, host 100; --quick 100 / 20).";
}

}  // namespace gnio::perf
