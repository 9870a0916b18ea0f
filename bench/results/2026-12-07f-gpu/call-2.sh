#!/usr/bin/env bash
# Second device call of 2026-12-07f (device time for one more call only, so measurements and the
# proxy's GPU tests share it). First, on a quiet machine, with binaries built on the CPU machine and
# carried (build-carried: libgnio, gnio-perf, gnio-run, gnio-tcp-floor of e5cfd26; libs/: the shared
# libraries they need that the GPU machine lacks): how many tcp connections per pair
# (GNIO_NET_NSOCKS) the proxy should open on GPUs. Through the tcp proxy, 2 ranks as 2 nodes, each
# run under its own MPS daemon, every byte checked by gnio-perf: the 64 MiB put from 1 and 16
# blocks with 4 and 8 connections and the default (0: auto, 8 on GPUs), two interleaved rounds;
# put / put_signal latency and the 8-byte rates with 4 and 8 (and 4 with a command ring of 4096
# slots, and with the proxy's stage times); allreduce 16-256 MiB with 4 and 8; the raw TCP floor
# first and last. Then, built on the GPU machine, the GPU tests that go through the proxy (they
# now run with 8 connections across nodes).
#   OUT=... CALL_S=585 bash bench/results/2026-12-07f-gpu/call-2.sh   (carry build-carried, .deps/tool-debs)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
L=$PWD/build-carried/src:$PWD/build-carried/libs:/usr/local/cuda/lib64
C=$PWD/build-carried
mkdir -p "$x/net"
budget=${MEASURE_S:-110}  # seconds for the measurements; the build and the suite need the rest
more() { [ $((SECONDS - start)) -lt $budget ]; }
LD_LIBRARY_PATH=$L timeout 30 "$C/gnio-tcp-floor" --json "$x/net/floor-1.json" >"$x/net/floor-1.log" 2>&1
at "floor 1 rc=$?"
run() {  # NAME NSOCKS SECONDS gnio-perf-args...
  local name=$1 ns=$2 s=$3
  shift 3
  env ${EXTRA:-} LD_LIBRARY_PATH=$L GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_NET_NSOCKS=$ns \
    timeout $((s + 5)) tests/gpu/concurrent-ranks.sh 2 "$C/gnio-run" -n 2 --nodes 2 \
    --timeout "$s" -- "$C/gnio-perf" "$@" --json "$x/net/$name.json" >"$x/net/$name.log" 2>&1
  at "$name rc=$?"
}
for round in 1 2; do
  for ns in 4 8 0; do
    for nb in 1 16; do
      more || break 3
      run put64M-ns$ns-b$nb-$round $ns 20 rma --op put --scope block --mode bw --blocks $nb \
        -b 64M -e 64M --reps 3
    done
  done
done
for ns in 4 8; do
  more || break
  run lat-ns$ns $ns 20 rma --op put,put_signal --scope block --mode lat -b 8 -e 4K -f 8 --reps 3
  for op in put put_signal signal; do
    more || break
    run rate-$op-ns$ns $ns 15 msgrate --op $op --grid 8 --block 128 -n 200
  done
done
# Is the 8-byte rate held back by the command ring's size? (GNIO_PROXY_SLOTS, default 256)
more && EXTRA="GNIO_PROXY_SLOTS=4096" run rate-put-ns4-slots4096 4 15 msgrate --op put --grid 8 \
  --block 128 -n 200
# Where a proxied 8-byte put's time goes at that rate (per-frame stage times when the run ends).
more && EXTRA="GNIO_PROXY_STATS=1" run rate-put-ns4-stats 4 15 msgrate --op put --grid 8 \
  --block 128 -n 200
for ns in 4 8; do
  more || break
  run allreduce-ns$ns $ns 25 coll --coll allreduce -b 16M -e 256M -f 4
done
LD_LIBRARY_PATH=$L timeout 30 "$C/gnio-tcp-floor" --json "$x/net/floor-2.json" >"$x/net/floor-2.log" 2>&1
at "floor 2 rc=$?"
# The GPU tests that go through the proxy (the only ones the connection count changes; the whole
# suite passed in call 1 on the tree before): their binaries only, built here.
OUT=$OUT/a BUILD_TARGETS="gnio-run coll_fault_test_2_gpu coll_test_2_gpu channel_test_2_gpu \
  rma_net_test_gpu rma_persistent_test_gpu rma_test_2_gpu stream_rma_test_3_gpu soak_test_2_gpu" \
  timeout 200 tests/gpu/session-run.sh build-perf
at "build done"
NET_MPS='^(coll_test_4_2nodes_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
NET_TESTS='(2nodes|rma_net_test|rma_persistent_test|soak_test).*_gpu$'
OUT=$OUT/b SUITE_FILTER="$NET_MPS" SUITE_MPS=1 timeout 60 tests/gpu/session-run.sh suite
at "suite b (MPS) done"
OUT=$OUT/c SUITE_FILTER="$NET_TESTS" SUITE_EXCLUDE="$NET_MPS" timeout $(($(left) - 8)) \
  tests/gpu/session-run.sh suite
at "suite c done"
finish
