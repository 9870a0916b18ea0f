// gnio-perf coll-kernel's command line (coll_kernel_gnio_options.hpp): its options and
// the notes of its help, for the driver to parse.
#include "coll_kernel_gnio_options.hpp"

#include "harness/cli_options.hpp"

namespace gnio::perf {

void add_coll_kernel_options(OptionList& list, KernelCollOptions& o) {
  add_choice_option(list, "--algo", "--algo", o.algo,
                    {{"auto", {CollAlgo::Auto}},
                     {"ll", {CollAlgo::LL}},
                     {"oneshot", {CollAlgo::OneShot}},
                     {"twoshot", {CollAlgo::TwoShot}},
                     {"ring", {CollAlgo::Ring}}},
                    "algorithm of every call (default auto)");
  add_choice_option(list, "--coop", "--coop", o.warp, {{"block", {false}}, {"warp", {true}}},
                    "the group that calls: a block of 256 threads (default) or one warp");
  add_count_option(list, "--reps", "--reps", o.reps, 1, 1000,
                   "timed kernels per size (default 9; --quick 3)");
  list.footer =
      "allreduce, float32 sum, out of place, inside one running kernel per rank. Defaults:\n"
      "-b 8 -e 64K -f 2 -n 1000 -w 100 (GPU); host backend -e 4K -n 50 -w 5. --quick: -e 4K\n"
      "-n 100 -w 10 (host: -n 10 -w 2).";
}

}  // namespace gnio::perf
