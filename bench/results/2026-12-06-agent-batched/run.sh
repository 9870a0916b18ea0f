#!/usr/bin/env bash
# One device call: build (what the steps need); the proxy's GPU tests under MPS with the default (the delivery agent);
# the proxy's stage times (GNIO_PROXY_STATS=1) for an 8-byte put_signal one way with the agent and
# with a launch per batch, beside raw TCP (gnio-tcp-floor); then the agent (B) against a launch per
# batch (A) through the tcp proxy (tests/gpu/session-run.sh net-ab: NET_AB_RUNS interleaved runs
# of the RMA latency table 8 B..4 KiB and the 8-byte put / put_signal / signal rates).
# 2 ranks as 2 nodes on one GPU, every two-rank run under an MPS daemon.
#   OUT=... bash bench/results/2026-12-06-agent-batched/run.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
B=build-gpu
# Only what the steps below run (the whole build takes ~150 s of scarce device time).
BUILD_TARGETS="gnio-run gnio-perf gnio-tcp-floor rma_test_2_gpu rma_net_test_gpu rma_persistent_test_gpu coll_test_2_gpu" \
  timeout 300 tests/gpu/session-run.sh build-perf
OUT=$OUT/proxy SUITE_MPS=1 \
  SUITE_FILTER='^(rma_net_test_gpu|rma_persistent_test_gpu|rma_persistent_test_agent_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_4_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$' \
  timeout 150 tests/gpu/session-run.sh suite
x=$OUT/extra
mkdir -p "$x"
timeout 30 $B/perf/probes/gnio-tcp-floor --json "$x/floor.json" >"$x/floor.log" 2>&1
for agent in 0 1; do
  GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 \
    $B/tools/gnio-run/gnio-run -n 2 --nodes 2 --timeout 35 -- $B/perf/gnio-perf/gnio-perf rma \
    --op put_signal --scope block --mode lat -b 8 -e 8 --reps 5 >"$x/stats-agent$agent.log" 2>&1
done
nvidia-smi -L >"$x/gpu.txt" 2>&1
echo "before net-ab: $((SECONDS - start)) s" >"$x/time.txt"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
left=$((${CALL_S:-560} - (SECONDS - start)))
[ "$left" -gt 60 ] && NET_AB_RUNS=${NET_AB_RUNS:-2} timeout "$left" tests/gpu/session-run.sh net-ab
echo "call took $((SECONDS - start)) s"
# Only a few files come back from a call: everything is in the .tgz files.
rm -rf "$OUT/r" "$OUT/proxy/r" "$OUT/extra"
