#!/usr/bin/env bash
# The first device call of 2026-12-07g. Everything carried (build-carried/, built on the CPU
# machine by ../2026-12-07f-gpu/make-carried.sh from the checked-out tree, plus
# gnio-coresidency-probe copied into it); nothing is built there.
# 1. Why the delivery agent never applied a delivery beside a persistent kernel (2026-12-07, one
#    H100): gnio-coresidency-probe, plainly and as an MPS client (which blocks start beside a
#    kernel holding every SM, by threads and shared memory); rma_persistent_test with the agent
#    (its shared state now in device memory, not block-shared memory), as registered (a block on
#    every SM) and with 8 blocks.
# 2. The GPU tests that go through the proxy (call-3.sh of 2026-12-07f): the first GPU run with 8
#    connections per pair by default (GNIO_NET_NSOCKS=0).
# 3. Through the tcp proxy, 2 ranks as 2 nodes, each run under its own MPS daemon: the raw TCP
#    floor; put_signal latency with the proxy's stage times and 8-byte rates, launches against the
#    agent (GNIO_PROXY_AGENT=0/1); the 64 MiB put from 1 and 16 blocks over 4 connections and the
#    default; allreduce 16-256 MiB with the default.
#   bash bench/results/2026-12-07f-gpu/make-carried.sh && cp gnio-coresidency-probe build-carried/
#   OUT=... CALL_S=400 bash bench/results/2026-12-07g-gpu/call-4.sh   (carry build-carried)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
C=$PWD/build-carried
export LD_LIBRARY_PATH=$C/src:$C/libs:/usr/local/cuda/lib64
export GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_FLIGHT_RECORDER_DIR=$x/flight
mkdir -p "$x/tests" "$x/net" "$x/flight" "$x/probe"
R=$C/gnio-run T=$C/tests CR="tests/gpu/concurrent-ranks.sh"
timeout 40 "$C/gnio-coresidency-probe" >"$x/probe/plain.txt" 2>&1
at "probe plain rc=$?"
timeout 40 $CR 2 "$C/gnio-coresidency-probe" >"$x/probe/mps.txt" 2>&1
at "probe mps rc=$?"
check persistent_agent 30 GNIO_TIMEOUT=10 GNIO_PROXY_AGENT=1 -- $CR 2 "$R" -n 2 --timeout 25 \
  --nodes 2 -- "$T/rma_persistent_test_gpu"
check persistent_agent_8blocks 30 GNIO_TIMEOUT=10 GNIO_PROXY_AGENT=1 \
  GNIO_TEST_PERSISTENT_BLOCKS=8 -- $CR 2 "$R" -n 2 --timeout 25 --nodes 2 -- \
  "$T/rma_persistent_test_gpu"
proxy_tests "$R" "$T"
timeout 30 "$C/gnio-tcp-floor" --json "$x/net/floor.json" >"$x/net/floor.log" 2>&1
at "floor rc=$?"
run() {  # NAME ENV... -- gnio-perf-args...   (S: seconds it may take, default 15)
  local name=$1 s=${S:-15}
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [ "$(left)" -gt $((s + 5)) ] || return
  env "${envs[@]}" timeout $((s + 3)) $CR 2 "$R" -n 2 --nodes 2 --timeout "$s" -- "$C/gnio-perf" \
    "$@" --json "$x/net/$name.json" >"$x/net/$name.log" 2>&1
  at "$name rc=$?"
}
for agent in 0 1; do
  run lat-agent$agent GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 -- rma --op put_signal \
    --scope block --mode lat -b 8 -e 4K -f 8 --reps 3
done
for agent in 0 1; do
  for op in put put_signal; do
    run rate-$op-agent$agent GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 -- msgrate --op $op --grid 8 --block 128 -n 200
  done
done
for ns in 4 0; do
  for nb in 1 16; do
    run put64M-ns$ns-b$nb GNIO_NET_NSOCKS=$ns -- rma --op put --scope block --mode bw --blocks $nb \
      -b 64M -e 64M --reps 3
  done
done
S=30 run allreduce-ns0 GNIO_NET_NSOCKS=0 -- coll --coll allreduce -b 16M -e 256M -f 4
finish
