#!/usr/bin/env bash
# The host backend (2-core CPU machine), 2 ranks as 2 nodes: the tcp and the ucx (UCX over tcp)
# proxy transports side by side, two interleaved rounds, with the raw TCP floor first.
#   BUILD=/path/to/host-build OUT=dir bash bench/results/2026-12-07f-cpu/run.sh
set -uo pipefail
B=${BUILD:?host build dir} O=${OUT:?output dir}
mkdir -p "$O"
"$B/perf/probes/gnio-tcp-floor" --streams 1 --bytes 512M >"$O/floor.log" 2>&1
for round in 1 2; do
  for net in tcp ucx; do
    e=(env GNIO_BACKEND=host GNIO_NET=$net UCX_TLS=tcp)
    "${e[@]}" timeout 120 "$B/tools/gnio-run/gnio-run" -n 2 --nodes 2 -- "$B/perf/gnio-perf/gnio-perf" \
      rma --op put_signal --scope thread --mode lat -b 8 -e 4K -f 8 --reps 3 >"$O/lat-$net-$round.log" 2>&1
    "${e[@]}" timeout 120 "$B/tools/gnio-run/gnio-run" -n 2 --nodes 2 -- "$B/perf/gnio-perf/gnio-perf" \
      rma --op put --scope block --mode bw -b 16M -e 16M --reps 5 >"$O/put16M-$net-$round.log" 2>&1
    "${e[@]}" timeout 120 "$B/tools/gnio-run/gnio-run" -n 2 --nodes 2 -- "$B/perf/gnio-perf/gnio-perf" \
      msgrate --op put -n 1000 >"$O/rate-put-$net-$round.log" 2>&1
    echo "round $round $net done"
  done
done
