// gnio-perf coll: nccl-tests-style benchmark of gnio's stream-ordered collectives (gnio/coll.hpp),
// optionally side by side with NCCL (--vs-nccl, coll_nccl.hpp).
//
//   gnio-run -n 2 -- gnio-perf coll [--coll allreduce] [-d f32] [-o sum] [-b 8] [-e 256M] ...
//
// For every collective x type x operator (a table each) and size (a row each), out of place and in
// place side by side as nccl-tests prints them:
//  * size   nccl-tests' "size": bytes of the larger of the rank's two buffers (allreduce,
//           broadcast, reduce: count x elem; reduce_scatter: the send buffer, n x recvcount x elem;
//           allgather: the recv buffer, n x sendcount x elem; alltoall: n x count x elem per
//           buffer; alltoallv: alltoall's, the nominal figure its uneven counts average to).
//           Requested sizes are rounded down to whole counts (at least 1 element per rank).
//  * count  the count the call takes (NCCL's convention: per rank, per peer for alltoall).
//  * time   per call, the slowest rank's, median over --reps timed measurements of `iters` calls
//           each: a CUDA graph of -G calls replayed (graph), or the calls enqueued one by one
//           (eager), timed with CUDA events (a steady clock on the host backend).
//  * algbw  size / time; busbw = algbw x nccl-tests' factor: allreduce 2(n-1)/n; reduce_scatter,
//           allgather, alltoall(v) (n-1)/n; broadcast, reduce 1. 1 GB = 1e9 bytes.
//  * #wrong elements that differ from the exact expected result (perf/harness/coll_data.hpp),
//           summed over ranks: before timing, each point runs once on poisoned outputs (plus a
//           guard), every element of every rank checked. Any wrong element makes the exit status 1.
// This file is host code only (plain C++): kernels are gnio's, graphs and events are in
// cuda_graph.cpp and event_timer.cpp. The subcommand's command line is in coll_gnio_options.hpp,
// the benchmark (the plan and the run) in coll_gnio_bench.hpp/.cpp, its report in
// coll_gnio_report.cpp.
#include "coll_gnio_bench.hpp"
#include "coll_gnio_options.hpp"
#include "harness/driver.hpp"

namespace gnio::perf {
namespace {

int run_coll(CommonOptions& common, const CollOptions& opts) {
  CollBench bench(common, opts);
  return bench.run();
}

const SubcommandRegistrar kRegisterColl(make_subcommand<CollOptions>(
    "coll",
    "collectives (allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall(v)) over all "
    "ranks, nccl-tests style; --vs-nccl beside NCCL",
    add_coll_options, run_coll));

}  // namespace
}  // namespace gnio::perf
