#!/usr/bin/env bash
# Fourth device call of 2026-12-07c, on the tree where a block's collective pipes through the
# proxy have their leader poll the landing flags (80b6f27; run on 7756080, where the reader of the
# ring's counters also reads both): the whole build; the 64 MiB put from 16 and 64 blocks; allreduce through
# the tcp proxy (2 ranks as 2 nodes, MPS) beside 652677e's pack (.oldpack/old-pre-coll.tgz, the
# tree before that change), interleaved rounds; the raw-TCP floor; a one-way put_signal with the
# proxy's per-frame times; every GPU test.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07c-gpu-put16/call-d.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
unpack_pack pre-coll
timeout 30 build-gpu/perf/probes/gnio-tcp-floor --quick --json "$x/floor.json" >"$x/floor.log" 2>&1
at "floor rc=$?"
for rep in 1 2; do
  for b in new old; do
    if [ $b = new ]; then run=$R perf=$P lib=${ucx:-}
    else run=$old/gnio-run perf=$old/gnio-perf lib=$old${ucx:+:$ucx}; fi
    [ "$(left)" -gt 260 ] || break 2
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda GNIO_NET=tcp timeout 60 tests/gpu/concurrent-ranks.sh 2 \
      $run -n 2 --nodes 2 --timeout 55 -- $perf coll --coll allreduce -b 8 -e 256M -f 16 \
      --json "$x/allreduce-$b-$rep.json" >"$x/allreduce-$b-$rep.log" 2>&1
    at "allreduce $b rep $rep rc=$?"
  done
done
for nb in 16 64; do
  GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
    --timeout 35 -- $P rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M --reps 3 \
    >"$x/put64-b$nb.log" 2>&1
  at "put64 b$nb rc=$?"
done
# Where a one-way put_signal's time goes: the proxy's per-frame times (send, receive, deliver).
GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_PROXY_STATS=1 timeout 40 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
  --nodes 2 --timeout 35 -- $P rma --op put_signal --scope thread --mode lat -b 8 -e 8 --reps 3 \
  >"$x/put_signal-lat-stats.log" 2>&1
at "put_signal stats rc=$?"
suite $(($(left) - 40))
finish
