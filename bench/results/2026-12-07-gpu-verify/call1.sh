#!/usr/bin/env bash
# First device call of 2026-12-07: the whole build, then every GPU test (those whose two ranks
# must run at once on one GPU under MPS), then, as time allows, the proxy's stage times for an
# 8-byte put_signal with the delivery agent and with a launch per batch beside raw TCP.
#   OUT=... CALL_S=570 bash bench/results/2026-12-07-gpu-verify/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-570} - (SECONDS - start))); }
B=build-gpu R=build-gpu/tools/gnio-run/gnio-run P=build-gpu/perf/gnio-perf/gnio-perf
X='^(perf_coll_kernel_quick_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
OUT=$OUT/a timeout 230 tests/gpu/session-run.sh build
echo "build done at $((SECONDS - start)) s" >"$OUT/time.txt"
OUT=$OUT/a SUITE_EXCLUDE="$X" timeout $(($(left) - 70)) tests/gpu/session-run.sh suite
echo "suite a done at $((SECONDS - start)) s" >>"$OUT/time.txt"
OUT=$OUT/b SUITE_FILTER="$X" SUITE_MPS=1 timeout $(($(left) - 10)) tests/gpu/session-run.sh suite
echo "suite b done at $((SECONDS - start)) s" >>"$OUT/time.txt"
x=$OUT/extra
mkdir -p "$x"
nvidia-smi -L >"$x/gpu.txt" 2>&1
[ "$(left)" -gt 25 ] && timeout 20 $B/perf/probes/gnio-tcp-floor --json "$x/floor.json" >"$x/floor.log" 2>&1
for agent in 0 1; do
  [ "$(left)" -gt 25 ] || break
  GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 GNIO_NET=tcp timeout 22 tests/gpu/concurrent-ranks.sh 2 \
    $R -n 2 --nodes 2 --timeout 18 -- $P rma --op put_signal --scope block --mode lat -b 8 -e 8 \
    --reps 5 >"$x/stats-agent$agent.log" 2>&1
done
echo "call took $((SECONDS - start)) s" >>"$OUT/time.txt"
cp "$OUT/time.txt" "$x/"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
rm -rf "$OUT/a/r" "$OUT/b/r" "$x"
