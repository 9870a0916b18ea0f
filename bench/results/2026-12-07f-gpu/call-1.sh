#!/usr/bin/env bash
# First device call of 2026-12-07f: the GPU suite on the tree whose proxy host code changed since
# the last GPU run (dfb3ed5: ticket ledger and open-request table shared by tcp and ucx, ucx
# teardown drain); then, through the tcp proxy (2 ranks as 2 nodes, each run under its own MPS
# daemon), the 64 MiB put from 1 and 16 blocks over GNIO_NET_NSOCKS 4 / 5 / 8 connections and
# GNIO_PROXY_CHUNK 1M / 4M beside the raw TCP floor (issue 22: >= 0.6 x the floor's 4 streams;
# with 4 connections only 3 carry a striped put); then the issue-22 latency and rate table.
#   OUT=... CALL_S=575 bash bench/results/2026-12-07f-gpu/call-1.sh   (carry .deps/tool-debs)
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
suite 270
mkdir -p "$x/net"
timeout 30 build-gpu/perf/probes/gnio-tcp-floor --json "$x/net/floor.json" >"$x/net/floor.log" 2>&1
at "floor rc=$?"
for ns in 4 5 8; do
  for chunk in 1M 4M; do
    for nb in 1 16; do
      [ "$(left)" -gt 70 ] || break 3
      GNIO_NET=tcp GNIO_NET_NSOCKS=$ns GNIO_PROXY_CHUNK=$chunk timeout 40 \
        tests/gpu/concurrent-ranks.sh 2 "$R" -n 2 --nodes 2 --timeout 35 -- "$P" rma --op put \
        --scope block --mode bw --blocks $nb -b 64M -e 64M --reps 3 \
        --json "$x/net/put64M-ns$ns-c$chunk-b$nb.json" >"$x/net/put64M-ns$ns-c$chunk-b$nb.log" 2>&1
      at "put ns=$ns chunk=$chunk blocks=$nb rc=$?"
    done
  done
done
l=$(left)
[ "$l" -gt 45 ] && OUT=$OUT/c NET_PARTS="lat rate" timeout $((l - 10)) \
  tests/gpu/session-run.sh net-one-gpu
at "net-one-gpu done"
cp -r "$OUT/c/r/net" "$x/net-table" 2>/dev/null
finish
