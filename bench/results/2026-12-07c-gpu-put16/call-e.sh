#!/usr/bin/env bash
# Last device call of 2026-12-07c (no build: e73a22a's pack, .oldpack/old-now.tgz, the tree the
# session ended its device changes with): where a one-way put_signal's time goes with a kernel
# launch per received batch and with the delivery agent (GNIO_PROXY_AGENT=1), from the proxy's
# per-frame times (GNIO_PROXY_STATS=1), then the 8-byte put_signal rate both ways. 2 ranks as 2
# nodes, tcp, MPS.
#   OUT=... CALL_S=140 bash bench/results/2026-12-07c-gpu-put16/call-e.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
unpack_pack now
run() {  # NAME AGENT gnio-perf-args...
  local name=$1 agent=$2; shift 2
  LD_LIBRARY_PATH=$old${ucx:+:$ucx} GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_PROXY_STATS=1 \
    GNIO_PROXY_AGENT=$agent timeout 30 tests/gpu/concurrent-ranks.sh 2 $old/gnio-run -n 2 \
    --nodes 2 --timeout 25 -- $old/gnio-perf "$@" >"$x/$name.log" 2>&1
  at "$name rc=$?"
}
for rep in 1 2; do
  for agent in 0 1; do
    [ "$(left)" -gt 20 ] || break 2
    run lat-agent$agent-$rep $agent rma --op put_signal --scope thread --mode lat -b 8 -e 8 --reps 3
    run rate-agent$agent-$rep $agent msgrate --op put_signal --grid 8 --block 128 -n 20 --reps 3
  done
done
finish
