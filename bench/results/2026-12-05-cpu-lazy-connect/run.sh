#!/usr/bin/env bash
# Connections on first use against connections at creation at 2 ranks (issue 30: "nothing slower
# at 2 ranks"): gnio-perf rma latency (put, get, put_signal, atomics; 8 B-64 KiB) and allreduce
# (8 B-1 MiB) through the tcp proxy, host backend, 2 ranks as 2 nodes, each bound to its own CPU,
# GNIO_NET_CONNECT=eager and =lazy alternating ROUNDS times; then bench/compare-builds.py
# (old = eager, new = lazy; ratio = lazy / eager, medians over the rounds).
#
#   BUILD=build ROUNDS=5 OUT=bench/results/2026-12-05-cpu-lazy-connect \
#     bench/results/2026-12-05-cpu-lazy-connect/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/out/lazy-connect}
mkdir -p "$out/json"
run=("$build/tools/gnio-run/gnio-run" -n 2 --nodes 2 --bind cores --timeout 300 --)
perf=$build/tools/gnio-perf/gnio-perf
for i in $(seq "${ROUNDS:-5}"); do
  for mode in eager lazy; do
    echo "round $i: $mode"
    GNIO_NET_CONNECT=$mode GNIO_BACKEND=host GNIO_NET=tcp "${run[@]}" "$perf" rma \
      --op put,get,put_signal,atomic --scope thread --mode lat -b 8 -e 64K -f 8 --reps 9 \
      --json "$out/json/rma-$mode-$i.json" >/dev/null
    GNIO_NET_CONNECT=$mode GNIO_BACKEND=host GNIO_NET=tcp "${run[@]}" "$perf" coll \
      --coll allreduce -b 8 -e 1M -f 8 --reps 9 --json "$out/json/ar-$mode-$i.json" >/dev/null
  done
done
python3 "$root/bench/compare-builds.py" --old "$out/json/rma-eager-*.json" \
  --new "$out/json/rma-lazy-*.json" --markdown "$out/rma.md" \
  --title "RMA latency through the tcp proxy: lazy / eager connections (host, 2 ranks as 2 nodes)"
python3 "$root/bench/compare-builds.py" --old "$out/json/ar-eager-*.json" \
  --new "$out/json/ar-lazy-*.json" --markdown "$out/allreduce.md" \
  --title "allreduce through the tcp proxy: lazy / eager connections (host, 2 ranks as 2 nodes)"
