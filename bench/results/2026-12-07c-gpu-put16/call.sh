#!/usr/bin/env bash
# The device call after the change to proxy waits (one thread of the GPU reads the ring's
# host-memory counters at a time, the others read its copy in device memory): the whole build,
# the 64 MiB put from 1, 16 and 64 blocks beside head-before-the-change's pack
# (.oldpack/old-head.tgz, d7db7d0) in interleaved rounds, every GPU test (the two-rank ones under
# MPS), then the RMA latency table beside e8c5dec (.oldpack/old-e8c5dec.tgz) as time allows.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07c-gpu-put16/call.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
unpack_pack e8c5dec && e8=$old
unpack_pack head && head=$old
for rep in 1 2; do
  for b in new head; do
    if [ $b = new ]; then run=$R perf=$P lib=${ucx:-}
    else run=$head/gnio-run perf=$head/gnio-perf lib=$head${ucx:+:$ucx}; fi
    for nb in 1 16 64; do
      [ "$(left)" -gt 400 ] || break 3
      LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 \
        $run -n 2 --nodes 2 --timeout 35 -- $perf rma --op put --scope block --mode bw \
        --blocks $nb -b 64M -e 64M --reps 3 >"$x/put64-$b-b$nb-$rep.log" 2>&1
      at "put64 $b b$nb rep $rep rc=$?"
    done
  done
done
suite $(($(left) - 100))
for i in 1 2; do
  for b in old new; do
    [ "$(left)" -gt 12 ] || break 2
    if [ $b = old ]; then perf=$e8/gnio-perf lib=$e8${ucx:+:$ucx}
    else perf=$P lib=${ucx:-}; fi
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
      --timeout 18 -- $perf rma --mode lat -b 8 -e 64K -f 8 --json "$x/rma-lat-$b-$i.json" \
      >"$x/lat-$b-$i.log" 2>&1
    at "lat $b $i rc=$?"
  done
done
finish
