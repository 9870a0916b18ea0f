#!/usr/bin/env bash
# Large puts through the tcp proxy on the host backend (2 ranks as 2 nodes, each bound to its own
# CPU), this build beside an older one, interleaved with raw TCP's 1-stream floor, ROUNDS times:
# a 16 MiB put (2 blocks, issue 22's host criterion) and a 64 MiB put from 16 blocks (16 striped
# puts of 4 MiB, the shape that was slowest on the GPU). Medians per configuration.
#
#   NEW=/work/build-host OLD=/work/build-old ROUNDS=6 bench/results/2026-12-07-cpu-put-pipelined/run.sh
set -euo pipefail
new=${NEW:?the build to measure}
old=${OLD:?the build to compare with}
run=$new/tools/gnio-run/gnio-run
for i in $(seq "${ROUNDS:-6}"); do
  f=$("$new/perf/probes/gnio-tcp-floor" --streams 1 --bytes 512M | awk '/1 stream/{print $3}')
  echo "floor $f"
  for b in new old; do
    build=$new
    [ "$b" = old ] && build=$old
    for shape in "2 16M" "16 64M"; do
      read -r blocks size <<<"$shape"
      v=$(GNIO_BACKEND=host GNIO_NET=tcp "$run" -n 2 --nodes 2 --bind cores --timeout 120 -- \
        "$build/perf/gnio-perf/gnio-perf" rma --op put --scope block --mode bw --blocks "$blocks" \
        -b "$size" -e "$size" --reps 15 | awk '/^\[0\] +[0-9]+ /{print $7}')
      echo "$b-${blocks}x$size $v"
    done
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
    print("%-12s median %5.2f GB/s  %.2fx the floor  (%s)" % (k, m, m / floor, " ".join("%.2f" % x for x in v)))'
