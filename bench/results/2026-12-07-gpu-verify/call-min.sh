#!/usr/bin/env bash
# The smallest device call that checks this session's device and proxy changes on a GPU, for when
# the device time left is too short for the whole suite: a build without the collectives
# (-DGNIO_COLL=OFF), the proxy's RMA tests under MPS (the fence mark and pipelined stripes, the
# batched delivery agent, one fence per batch of signals), then as time allows the 64 MiB put from
# 16 and 1 blocks beside e8c5dec's build, and the proxy's stage times for an 8-byte put_signal
# with the agent and with a launch per batch beside raw TCP. 2 ranks as 2 nodes on one GPU.
#   OUT=... CALL_S=380 bash bench/results/2026-12-07-gpu-verify/call-min.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-380} - (SECONDS - start))); }
B=build-gpu R=build-gpu/tools/gnio-run/gnio-run P=build-gpu/perf/gnio-perf/gnio-perf
CMAKE_EXTRA="-DGNIO_COLL=OFF -DGNIO_BUILD_EXAMPLES=OFF" \
  BUILD_TARGETS="gnio-run gnio-perf gnio-tcp-floor rma_test_2_gpu rma_net_test_gpu rma_persistent_test_gpu" \
  timeout 200 tests/gpu/session-run.sh build-perf
echo "build done at $((SECONDS - start)) s" >"$OUT/time.txt"
OUT=$OUT/proxy SUITE_MPS=1 \
  SUITE_FILTER='^(rma_net_test_gpu|rma_persistent_test_gpu|rma_test_2nodes_gpu|rma_test_4_2nodes_gpu)$' \
  timeout $(($(left) > 130 ? 130 : $(left))) tests/gpu/session-run.sh suite
echo "suite done at $((SECONDS - start)) s" >>"$OUT/time.txt"
x=$OUT/extra
mkdir -p "$x"
nvidia-smi -L >"$x/gpu.txt" 2>&1
tar xzf .oldpack/old-e8c5dec.tgz
ldconfig -p | grep -q libucp.so.0 || export LD_LIBRARY_PATH=$PWD/.old/ucx
for nb in 16 1; do
  for b in new old; do
    [ "$(left)" -gt 25 ] || break 2
    perf=$P lib=()
    [ $b = old ] && perf=$PWD/.old/gnio-perf lib=(LD_LIBRARY_PATH="$PWD/.old${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    env "${lib[@]}" GNIO_NET=tcp timeout 30 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
      --timeout 25 -- $perf rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M \
      --reps 3 >"$x/put64-$b-b$nb.log" 2>&1
  done
done
[ "$(left)" -gt 20 ] && timeout 15 $B/perf/probes/gnio-tcp-floor --json "$x/floor.json" >"$x/floor.log" 2>&1
for agent in 0 1; do
  [ "$(left)" -gt 20 ] || break
  GNIO_PROXY_AGENT=$agent GNIO_PROXY_STATS=1 GNIO_NET=tcp timeout 18 tests/gpu/concurrent-ranks.sh 2 \
    $R -n 2 --nodes 2 --timeout 15 -- $P rma --op put_signal --scope block --mode lat -b 8 -e 8 \
    --reps 5 >"$x/stats-agent$agent.log" 2>&1
done
echo "call took $((SECONDS - start)) s" >>"$OUT/time.txt"
cp "$OUT/time.txt" "$x/"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
rm -rf "$OUT/r" "$OUT/proxy/r" "$x"
