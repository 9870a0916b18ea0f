#!/usr/bin/env bash
# Third device call of 2026-12-07c, on the tree with the proxy waits that read the copy first
# (a thread reads the host-memory counter only when the copy is not enough): the whole build, the
# 64 MiB put from 1, 16 and 64 blocks, every GPU test (the two-rank ones under MPS), then the
# issue-22 figures beside raw TCP (session-run.sh net-one-gpu) and, as time allows, the delivery
# agent against a launch per batch (net-ab, one round).
#   OUT=... CALL_S=580 bash bench/results/2026-12-07c-gpu-put16/call-c.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
for nb in 1 16 64; do
  GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
    --timeout 35 -- $P rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M --reps 3 \
    >"$x/put64-b$nb.log" 2>&1
  at "put64 b$nb rc=$?"
done
suite 260
OUT=$OUT/c timeout $(($(left) - 60)) tests/gpu/session-run.sh net-one-gpu
at "net-one-gpu done"
l=$(left)
[ "$l" -gt 45 ] && OUT=$OUT/c NET_AB_RUNS=1 timeout $((l - 8)) tests/gpu/session-run.sh net-ab
at "net-ab done"
finish
