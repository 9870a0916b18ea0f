#!/usr/bin/env bash
# Second device call of 2026-12-07f: how many tcp connections per pair (GNIO_NET_NSOCKS) the
# proxy should open on GPUs. Binaries built on the CPU machine and carried (build-gpu: libgnio,
# gnio-perf, gnio-run, gnio-tcp-floor of this tree; libs/: the shared libraries they need that
# the GPU machine lacks). Through the tcp proxy, 2 ranks as 2 nodes, each run under its own MPS
# daemon, every byte checked by gnio-perf: the 64 MiB put from 1 and 16 blocks with 4 / 5 / 8
# connections and the default (0: auto), three interleaved rounds; then put / put_signal latency and the 8-byte rates with 4
# and 8 (and with a command ring of 4096 slots); then allreduce 16-256 MiB with 4 and 8; the raw TCP floor first and last.
#   OUT=... CALL_S=400 bash bench/results/2026-12-07f-gpu/call-2.sh   (carry build-gpu)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
export LD_LIBRARY_PATH=$PWD/build-gpu/src:$PWD/build-gpu/libs:/usr/local/cuda/lib64
R=$PWD/build-gpu/gnio-run P=$PWD/build-gpu/gnio-perf F=$PWD/build-gpu/gnio-tcp-floor
mkdir -p "$x/net"
timeout 30 "$F" --json "$x/net/floor-1.json" >"$x/net/floor-1.log" 2>&1
at "floor 1 rc=$?"
run() {  # NAME NSOCKS SECONDS gnio-perf-args...
  local name=$1 ns=$2 s=$3
  shift 3
  env ${EXTRA:-} GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_NET_NSOCKS=$ns timeout $((s + 5)) \
    tests/gpu/concurrent-ranks.sh 2 "$R" -n 2 --nodes 2 --timeout "$s" -- "$P" "$@" \
    --json "$x/net/$name.json" >"$x/net/$name.log" 2>&1
  at "$name rc=$?"
}
for round in 1 2 3; do
  for ns in 4 5 8 0; do
    for nb in 1 16; do
      [ "$(left)" -gt 60 ] || break 3
      run put64M-ns$ns-b$nb-$round $ns 30 rma --op put --scope block --mode bw --blocks $nb \
        -b 64M -e 64M --reps 3
    done
  done
done
for ns in 4 8; do
  [ "$(left)" -gt 60 ] || break
  run lat-ns$ns $ns 40 rma --op put,put_signal --scope block --mode lat -b 8 -e 64K -f 8 --reps 3
  for op in put put_signal signal; do
    run rate-$op-ns$ns $ns 30 msgrate --op $op --grid 8 --block 128 -n 200
  done
done
# Is the 8-byte rate held back by the command ring's size? (GNIO_PROXY_SLOTS, default 256)
for op in put put_signal; do
  [ "$(left)" -gt 60 ] || break
  EXTRA="GNIO_PROXY_SLOTS=4096" run rate-$op-ns4-slots4096 4 30 msgrate --op $op --grid 8 \
    --block 128 -n 200
done
for ns in 4 8; do
  [ "$(left)" -gt 60 ] || break
  run allreduce-ns$ns $ns $(($(left) / 2 - 15)) coll --coll allreduce -b 16M -e 256M -f 4
done
timeout 30 "$F" --json "$x/net/floor-2.json" >"$x/net/floor-2.log" 2>&1
at "floor 2 rc=$?"
finish
