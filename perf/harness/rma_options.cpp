// The rma subcommand's command line (rma_suite.hpp's RmaOptions), shared by gnio-perf and
// nvshmem-perf: its options and the notes of its help, for the driver to parse.
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "rma_suite.hpp"

namespace gnio::perf {

void add_rma_options(OptionList& list, RmaOptions& o) {
  const std::vector<Named<RmaOp>> ops = {
      {"put", {RmaOp::Put}},
      {"get", {RmaOp::Get}},
      {"put_signal", {RmaOp::PutSignal}},
      {"atomic", {RmaOp::FetchAdd, RmaOp::CompareSwap}},
      {"fetch_add", {RmaOp::FetchAdd}},
      {"compare_swap", {RmaOp::CompareSwap}},
      {"all", {RmaOp::Put, RmaOp::Get, RmaOp::PutSignal, RmaOp::FetchAdd, RmaOp::CompareSwap}}};
  const std::vector<Named<Scope>> scopes = {{"thread", {Scope::Thread}},
                                            {"warp", {Scope::Warp}},
                                            {"block", {Scope::Block}},
                                            {"all", {Scope::Thread, Scope::Warp, Scope::Block}}};
  const std::vector<Named<Mode>> modes = {{"lat", {Mode::Lat}},
                                          {"bw", {Mode::Bw}},
                                          {"bibw", {Mode::Bibw}},
                                          {"all", {Mode::Lat, Mode::Bw, Mode::Bibw}}};
  o.ops = parse_names<RmaOp>("all", "--op", ops);
  o.scopes = parse_names<Scope>("all", "--scope", scopes);
  o.modes = parse_names<Mode>("all", "--mode", modes);
  add_names_option(list, "--op", "--op", o.ops, ops,
                   "put, get, put_signal, atomic (= fetch_add,compare_swap), all [all]");
  add_names_option(list, "--scope", "--scope", o.scopes, scopes,
                   "thread, warp, block, all: the group that issues one call [all]\n"
                   "(atomics are single-thread operations and ignore it)");
  add_names_option(list, "--mode", "--mode", o.modes, modes,
                   "lat, bw (rank 0 -> 1), bibw (both ways at once), all [all]");
  add_count_option(list, "--blocks", "--blocks", o.blocks, 1, 1u << 20,
                   "blocks of bandwidth kernels [GPU: 2 per SM; host backend: 2]");
  add_count_option(list, "--threads", "--threads", o.threads, 32, 1024,
                   "threads per block (a multiple of 32); also the block size of block-scope\n"
                   "latency [GPU: 512; host backend: 32]");
  add_count_option(list, "--reps", "--reps", o.reps, 1, 1000,
                   "timed launches per point; the table shows their median, min, max [5]");
  add_size_option(list, "--lat-max", "--lat-max", o.lat_max, 1, UINT64_MAX,
                  "--lat-max must be at least 1 byte", "largest latency message [1M]");
  list.footer =
      "LIST is comma-separated. Defaults: GPU -b 8 -e 1G -f 2 -n 1000 -w 50; host backend\n"
      "-b 8 -e 1M -f 2 -n 20 -w 2. --quick: GPU -e 64M -f 16 -n 100 -w 10 --reps 3; host\n"
      "backend -e 64K -f 64 -n 5 -w 1 --reps 3. Large messages run fewer iterations, so a\n"
      "launch moves at most 2 MiB (latency; at least 5 operations) or 256 MiB (bandwidth; at\n"
      "least 1 repetition); host backend 64 KiB / 4 MiB. The table's iters column says.";
}

}  // namespace gnio::perf
