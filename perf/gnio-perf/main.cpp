// gnio-perf: benchmarks of gnio, nccl-tests style. Run it under a launcher:
//
//   gnio-run -n 2 -- gnio-perf rma [-b 8] [-e 1G] [--op put] [--json out.json] ...
//   gnio-run -n 8 -- gnio-perf coll [--coll allreduce] [-d f32] [-o sum] [-G 20] [--vs-nccl] ...
//
// `rma` measures the device API's one-sided operations between two ranks; `coll` the
// stream-ordered collectives over all ranks (optionally beside NCCL). Subcommands register
// themselves (driver.hpp); this file only hands over to the driver.
#include "harness/driver.hpp"

int main(int argc, char** argv) {
  return gnio::perf::driver_main(argc, argv, "benchmarks of gnio's GPU-initiated communication");
}
