#!/usr/bin/env bash
# Third device call of 2026-12-07c, on the tree with the proxy waits that read the copy first
# (a thread reads the host-memory counter only when the copy is not enough): the whole build, the
# 64 MiB put from 1, 16 and 64 blocks, every GPU test (the two-rank ones under MPS), then the
# issue-22 figures beside raw TCP (session-run.sh net-one-gpu) and, as time allows, the delivery
# agent against a launch per batch (net-ab, one round).
#   OUT=... CALL_S=580 bash bench/results/2026-12-07c-gpu-put16/call-c.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-580} - (SECONDS - start))); }
at() { echo "$* at $((SECONDS - start)) s" | tee -a "$OUT/time.txt"; }
R=$PWD/build-gpu/tools/gnio-run/gnio-run P=$PWD/build-gpu/perf/gnio-perf/gnio-perf
X='^(perf_coll_kernel_quick_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
nvidia-smi -L >"$OUT/gpu.txt" 2>&1
OUT=$OUT/a timeout 230 tests/gpu/session-run.sh build
at "build done"
x=$OUT/extra && mkdir -p "$x"
for nb in 1 16 64; do
  GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
    --timeout 35 -- $P rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M --reps 3 \
    >"$x/put64-b$nb.log" 2>&1
  at "put64 b$nb rc=$?"
done
OUT=$OUT/a SUITE_EXCLUDE="$X" timeout 260 tests/gpu/session-run.sh suite
at "suite a done"
OUT=$OUT/b SUITE_FILTER="$X" SUITE_MPS=1 timeout 60 tests/gpu/session-run.sh suite
at "suite b done"
OUT=$OUT/c timeout $(($(left) - 60)) tests/gpu/session-run.sh net-one-gpu
at "net-one-gpu done"
l=$(left)
[ "$l" -gt 45 ] && OUT=$OUT/c NET_AB_RUNS=1 timeout $((l - 8)) tests/gpu/session-run.sh net-ab
at "net-ab done"
cp "$OUT/time.txt" "$x/"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
rm -rf "$OUT/a/r" "$OUT/b/r" "$OUT/c/r" "$x"
