#!/usr/bin/env bash
# The smallest device call that checks the delivery agent on a GPU: a build without the
# collectives (-DGNIO_COLL=OFF, ~1 minute), the proxy's RMA tests under MPS with the default (the
# agent) and with a launch per batch, then the proxy's stage times (GNIO_PROXY_STATS=1) for an
# 8-byte put_signal one way under each, beside raw TCP (gnio-tcp-floor), and the 8-byte put /
# put_signal / signal rates under each, as long as CALL_S allows. 2 ranks as 2 nodes on one GPU.
#   OUT=... CALL_S=300 bash bench/results/2026-12-06-agent-batched/run-min.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-300} - (SECONDS - start))); }
B=build-gpu R=build-gpu/tools/gnio-run/gnio-run P=build-gpu/perf/gnio-perf/gnio-perf
CMAKE_EXTRA="-DGNIO_COLL=OFF -DGNIO_BUILD_EXAMPLES=OFF" \
  BUILD_TARGETS="gnio-run gnio-perf gnio-tcp-floor rma_test_2_gpu rma_net_test_gpu rma_persistent_test_gpu" \
  timeout 200 tests/gpu/session-run.sh build-perf
OUT=$OUT/proxy SUITE_MPS=1 \
  SUITE_FILTER='^(rma_net_test_gpu|rma_persistent_test_gpu|rma_persistent_test_agent_gpu|rma_test_2nodes_gpu)$' \
  timeout $(($(left) > 100 ? 100 : $(left))) tests/gpu/session-run.sh suite
x=$OUT/extra
mkdir -p "$x"
nvidia-smi -L >"$x/gpu.txt" 2>&1
timeout 20 $B/perf/probes/gnio-tcp-floor --json "$x/floor.json" >"$x/floor.log" 2>&1
tar czf "$OUT/extra.tgz" -C "$OUT" extra
for agent in 1 0; do
  [ "$(left)" -gt 30 ] || break
  GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 GNIO_NET=tcp timeout 25 tests/gpu/concurrent-ranks.sh 2 \
    $R -n 2 --nodes 2 --timeout 20 -- $P rma --op put_signal --scope block --mode lat -b 8 -e 8 \
    --reps 5 >"$x/stats-agent$agent.log" 2>&1
  tar czf "$OUT/extra.tgz" -C "$OUT" extra
done
for op in put put_signal signal; do
  for agent in 1 0; do
    [ "$(left)" -gt 20 ] || break 2
    GNIO_PROXY_AGENT=$agent GNIO_NET=tcp timeout 18 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
      --nodes 2 --timeout 15 -- $P msgrate --op $op --grid 8 --block 128 -n 20 --reps 3 \
      >"$x/rate-$op-agent$agent.log" 2>&1
    tar czf "$OUT/extra.tgz" -C "$OUT" extra
  done
done
echo "call took $((SECONDS - start)) s" | tee "$x/time.txt"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
# Only a few files come back from a call: everything is in the .tgz files.
rm -rf "$OUT/r" "$OUT/proxy/r" "$OUT/extra"
