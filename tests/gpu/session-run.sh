#!/usr/bin/env bash
# Everything one GPU-machine session measures, in one call (the device time is scarce):
# the GPU test suite, compute-sanitizer memcheck on the functional suites, the examples,
# communicator creation against NCCL, the gnio-vs-NVSHMEM RMA comparison and the raw P2P probe.
# Results go to ${OUT:-./out}/r/ and are packed into ${OUT:-./out}/all.tgz.
#
#   tests/gpu/session-run.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/out}
r=$out/r
mkdir -p "$r"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
jobs=$(nproc)
B=$root/build-gpu
R=$B/tools/gnio-run/gnio-run
step() {  # step NAME command...: runs it with its output in $r/NAME.log and records the status
  local name=$1
  shift
  local t0=$SECONDS
  "$@" >"$r/$name.log" 2>&1
  local rc=$?
  printf '%-10s rc=%d  %4ds\n' "$name" "$rc" $((SECONDS - t0)) | tee -a "$r/steps.txt"
}
step suite env OUT="$r/suite" tests/gpu/run --jobs "$jobs" ${GNIO_SESSION_CMAKE_ARGS:+--cmake-arg "$GNIO_SESSION_CMAKE_ARGS"}
step examples bash -c "$R -n 2 -- $B/examples/ping_pong/ping_pong 10000 &&
  $R -n 2 -- $B/examples/ring_pipeline/ring_pipeline 256 65536 &&
  $R -n 2 -- $B/examples/halo_exchange/halo_exchange 1048576 200 &&
  $R -n 2 -- $B/tools/gnio-info/gnio-info --json"
nccl_dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
step init env GNIO_BENCH_NCCL_LIB="$nccl_dir/lib/libnccl.so.2" "$R" -n 2 -- "$B/bench/init/init_bench" 9
step rma env BUILD="$B" OUT="$r/rma" bench/run-rma.sh
[ -x "$B/bench/tools/gnio-p2p-probe" ] && step probe "$B/bench/tools/gnio-p2p-probe"
step quick "$R" -n 2 -- "$B/tools/gnio-perf/gnio-perf" rma --quick
step sanitize env OUT="$r/san" tests/gpu/run --sanitize --jobs "$jobs" -- \
  -R "^(rma_test_2_gpu|heap_test_2_gpu|window_test_2_gpu|rma_fault_BadInput_PeerOutOfRangeIsInvalidArgument_gpu)$"
tar czf "$out/all.tgz" -C "$out" r
cat "$r/steps.txt"
