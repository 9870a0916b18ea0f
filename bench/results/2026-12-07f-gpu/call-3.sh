#!/usr/bin/env bash
# The last device call of 2026-12-07f (under 250 s of device time left: nothing is built there).
# Everything carried, built on the CPU machine by make-carried.sh from the checked-out tree
# (build-carried: libgnio, gnio-perf, gnio-run, gnio-tcp-floor, and in tests/ the GPU test
# binaries that go through the proxy; libs/: the UCX and numa libraries the GPU machine lacks;
# CUDA's own come from /usr/local/cuda there).
# 1. The GPU tests that go through the proxy, which now open 8 connections per pair by default
#    (GNIO_NET_NSOCKS=0), with ctest's arguments and environment (tests/*/CMakeLists.txt) but
#    shorter time limits (call 1 ran each in 17 s or less), each two-rank test under MPS (as the
#    session suite runs rma_test_2nodes_gpu; ctest runs it and the coll ones without).
# 2. As time allows, through the tcp proxy, 2 ranks as 2 nodes, each run under its own MPS daemon:
#    the 64 MiB put from 1 and 16 blocks with 4 connections and with the default, interleaved;
#    put_signal latency and the 8-byte put rate with 4 and the default; allreduce 16-256 MiB with
#    4 and the default; the raw TCP floor first.
#   bash bench/results/2026-12-07f-gpu/make-carried.sh      # on the CPU machine, first
#   OUT=... CALL_S=230 bash bench/results/2026-12-07f-gpu/call-3.sh   (carry build-carried)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
C=$PWD/build-carried
export LD_LIBRARY_PATH=$C/src:$C/libs:/usr/local/cuda/lib64
export GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_FLIGHT_RECORDER_DIR=$x/flight
mkdir -p "$x/tests" "$x/net" "$x/flight"
R=$C/gnio-run T=$C/tests CR="tests/gpu/concurrent-ranks.sh"
proxy_tests "$R" "$T"
timeout 30 "$C/gnio-tcp-floor" --json "$x/net/floor.json" >"$x/net/floor.log" 2>&1
at "floor rc=$?"
run() {  # NAME NSOCKS gnio-perf-args...   (S: seconds it may take, default 15)
  local name=$1 ns=$2 s=${S:-15}
  shift 2
  [ "$(left)" -gt $((s + 5)) ] || return
  GNIO_NET_NSOCKS=$ns timeout $((s + 3)) $CR 2 "$R" -n 2 --nodes 2 --timeout "$s" -- "$C/gnio-perf" "$@" \
    --json "$x/net/$name.json" >"$x/net/$name.log" 2>&1
  at "$name rc=$?"
}
for round in 1 2; do
  for ns in 4 0; do
    for nb in 1 16; do
      run put64M-ns$ns-b$nb-$round $ns rma --op put --scope block --mode bw --blocks $nb \
        -b 64M -e 64M --reps 3
    done
  done
done
for ns in 4 0; do
  run lat-ns$ns $ns rma --op put_signal --scope block --mode lat -b 8 -e 4K -f 8 --reps 3
  run rate-put-ns$ns $ns msgrate --op put --grid 8 --block 128 -n 200
done
for ns in 4 0; do
  S=30 run allreduce-ns$ns $ns coll --coll allreduce -b 16M -e 256M -f 4
done
finish
