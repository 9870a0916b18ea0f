# What every one-call script for the GPU machine starts with (sourced, from bash, by a script that
# sets OUT and optionally CALL_S, the seconds the call may take; default 580):
#
#   source "$(dirname "$0")/../../../tests/gpu/device-call.sh"   # from bench/results/DATE-NAME/
#
# It moves to the repository root and defines:
#   R, P       gnio-run and gnio-perf of ./build-gpu (session-run.sh build)
#   MPS_TESTS  the GPU tests whose two ranks must run at once on one GPU (run them under MPS)
#   x          $OUT/extra, where the call's own logs go (made here)
#   left       seconds left of CALL_S;  at TEXT: "TEXT at N s" into $OUT/time.txt and stdout
#   build      the whole build (session-run.sh build, 230 s at most)
#   suite S    every GPU test: those outside MPS_TESTS within S seconds, then MPS_TESTS under MPS
#              within what is left
#   unpack_pack NAME  .oldpack/old-NAME.tgz into p/NAME (its files in p/NAME/.old); sets `old` to
#              that folder and `ucx` to UCX libraries for machines without them
#   check NAME LIMIT_S ENV... -- COMMAND...   one test command, bounded by LIMIT_S and by the
#              call's time left: its output in $x/tests/NAME.log, "NAME rc" in $x/tests/results.txt
#   proxy_tests RUN TESTS   the GPU tests that go through the proxy (2 ranks as 2 nodes), with
#              ctest's arguments and environment but shorter limits, each via check: RUN is
#              gnio-run, TESTS the folder of the test binaries (e.g. carried from the CPU machine)
#   finish     $x/time.txt, $OUT/extra.tgz, and the suites' raw folders removed (only a few files
#              come back from a call)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
start=$SECONDS
R=$PWD/build-gpu/tools/gnio-run/gnio-run P=$PWD/build-gpu/perf/gnio-perf/gnio-perf
MPS_TESTS='^(perf_coll_kernel_quick_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
x=$OUT/extra
mkdir -p "$x"
nvidia-smi -L >"$OUT/gpu.txt" 2>&1
left() { echo $((${CALL_S:-580} - (SECONDS - start))); }
at() { echo "$* at $((SECONDS - start)) s" | tee -a "$OUT/time.txt"; }
build() {
  OUT=$OUT/a timeout 230 tests/gpu/session-run.sh build
  at "build done"
}
suite() {
  OUT=$OUT/a SUITE_EXCLUDE="$MPS_TESTS" timeout "$1" tests/gpu/session-run.sh suite
  at "suite a done"
  OUT=$OUT/b SUITE_FILTER="$MPS_TESTS" SUITE_MPS=1 timeout $(($(left) - 5)) \
    tests/gpu/session-run.sh suite
  at "suite b done"
}
unpack_pack() {
  old=$PWD/p/$1/.old
  mkdir -p "p/$1" && tar xzf ".oldpack/old-$1.tgz" -C "p/$1" || return
  ldconfig -p | grep -q libucp.so.0 || ucx=$old/ucx
}
check() {
  local name=$1 limit=$2
  mkdir -p "$x/tests"
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [ "$limit" -lt $(($(left) - 15)) ] || limit=$(($(left) - 15))
  [ "$limit" -gt 5 ] || { echo "$name not run (no time left)" >>"$x/tests/results.txt"; return; }
  env "${envs[@]}" timeout "$limit" "$@" >"$x/tests/$name.log" 2>&1
  local rc=$?
  at "test $name rc=$rc"
  echo "$name $rc" >>"$x/tests/results.txt"
}
proxy_tests() {
  local run=$1 tests=$2 cr=tests/gpu/concurrent-ranks.sh
  check rma_test_2nodes_gpu 120 GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 -- $cr 2 "$run" -n 2 \
    --timeout 100 --nodes 2 -- "$tests/rma_test_2_gpu" \
    '--gtest_filter=Rma.Put*:Rma.Get*:Rma.Atomics*:Rma.SignalsAndComparisons:Rma.BarrierWorld*'
  check rma_net_test_gpu 120 GNIO_TIMEOUT=60 -- $cr 2 "$run" -n 2 --timeout 100 --nodes 2 -- \
    "$tests/rma_net_test_gpu" '--gtest_filter=Net.*'
  check rma_persistent_test_gpu 60 GNIO_TIMEOUT=30 -- $cr 2 "$run" -n 2 --timeout 50 --nodes 2 -- \
    "$tests/rma_persistent_test_gpu"
  check stream_rma_test_2nodes_gpu 60 GNIO_TIMEOUT=30 -- "$run" -n 2 --timeout 50 --nodes 2 -- \
    "$tests/stream_rma_test_3_gpu"
  check channel_test_2nodes_gpu 60 GNIO_TIMEOUT=60 -- $cr 2 "$run" -n 2 --timeout 50 --nodes 2 -- \
    "$tests/channel_test_2_gpu" '--gtest_filter=Channel.*'
  check rma_test_4_2nodes_gpu 60 GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 -- $cr 4 "$run" -n 4 \
    --timeout 50 --nodes 2 -- "$tests/rma_test_2_gpu" \
    '--gtest_filter=Rma.Put*:Rma.Get*:Rma.Atomics*:Rma.SignalsAndComparisons:Rma.Barrier*'
  check coll_test_2nodes_gpu 60 GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 -- "$run" -n 2 --timeout 50 \
    --nodes 2 -- "$tests/coll_test_2_gpu"
  check coll_fault_test_2nodes_gpu 60 GNIO_TIMEOUT=0.5 GNIO_HEAP_SIZE=64M -- "$run" -n 2 \
    --timeout 50 --nodes 2 -- "$tests/coll_fault_test_2_gpu"
}
finish() {
  cp "$OUT/time.txt" "$x/"
  tar czf "$OUT/extra.tgz" -C "$OUT" extra
  rm -rf "$OUT/a/r" "$OUT/b/r" "$OUT/c/r" "$x"
}
