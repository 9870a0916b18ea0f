#!/usr/bin/env bash
# Follow-up of call-4 (same carried build): do 8 connections per pair (the GPU default since
# e5cfd26) cost small operations? The 8-byte put and put_signal rates and put_signal latency over
# 4 connections and the default, interleaved, two rounds; the raw TCP floor first.
#   OUT=... CALL_S=150 bash bench/results/2026-12-07g-gpu/call-5.sh   (carry build-carried)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
C=$PWD/build-carried
export LD_LIBRARY_PATH=$C/src:$C/libs:/usr/local/cuda/lib64
export GNIO_BACKEND=cuda GNIO_NET=tcp
mkdir -p "$x/net"
R=$C/gnio-run CR="tests/gpu/concurrent-ranks.sh"
timeout 30 "$C/gnio-tcp-floor" --json "$x/net/floor.json" >"$x/net/floor.log" 2>&1
at "floor rc=$?"
run() {  # NAME ENV... -- gnio-perf-args...
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [ "$(left)" -gt 25 ] || return
  env "${envs[@]}" timeout 23 $CR 2 "$R" -n 2 --nodes 2 --timeout 20 -- "$C/gnio-perf" \
    "$@" --json "$x/net/$name.json" >"$x/net/$name.log" 2>&1
  at "$name rc=$?"
}
for round in 1 2; do
  for ns in 4 0; do
    for op in put put_signal; do
      run rate-$op-ns$ns-$round GNIO_NET_NSOCKS=$ns -- msgrate --op $op --grid 8 --block 128 -n 200
    done
    run lat-ns$ns-$round GNIO_NET_NSOCKS=$ns -- rma --op put_signal --scope block --mode lat \
      -b 8 -e 8 --reps 3
  done
done
finish
