#!/usr/bin/env bash
# A 16 MiB put through the tcp proxy (host backend, 2 ranks as 2 nodes, gnio-perf rma bw), this
# build beside an older one, each with the ranks bound to their own CPU (gnio-run --bind cores)
# and free, interleaved with raw TCP's 1-stream floor, ROUNDS times; medians per configuration.
#
#   NEW=build OLD=build-old ROUNDS=6 bench/results/2026-12-05-cpu-put-16m/run.sh
# (OLD's gnio-run may predate --bind: NEW's launches every configuration; each gnio-perf finds its
# own libgnio through its RUNPATH.)
set -euo pipefail
new=${NEW:?the build to measure}
old=${OLD:-}
run=$new/tools/gnio-run/gnio-run
configs=("new-bound:$new:cores" "new-free:$new:none")
[ -n "$old" ] && configs+=("old-bound:$old:cores" "old-free:$old:none")
for i in $(seq "${ROUNDS:-6}"); do
  f=$("$new/bench/tools/gnio-tcp-floor" --streams 1 --bytes 512M | awk '/1 stream/{print $3}')
  echo "floor $f"
  for c in "${configs[@]}"; do
    IFS=: read -r label build bind <<<"$c"
    v=$(GNIO_BACKEND=host GNIO_NET=tcp "$run" -n 2 --nodes 2 --bind "$bind" --timeout 120 -- \
      "$build/tools/gnio-perf/gnio-perf" rma --op put --scope block --mode bw -b 16M -e 16M \
      --reps 15 | awk '/^\[0\] *16777216/{print $7}')
    echo "$label $v"
  done
done | tee /dev/stderr | python3 -c '
import sys, statistics, collections
runs = collections.OrderedDict()
for line in sys.stdin:
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
floor = statistics.median(runs["floor"])
for k, v in runs.items():
    m = statistics.median(v)
    print("%-10s median %5.2f GB/s  %.2fx the floor  (%s)" % (k, m, m / floor, " ".join("%.2f" % x for x in v)))'
