#!/usr/bin/env bash
# No build on the GPU machine: carried packs (.oldpack/old-NAME.tgz made here by
# tests/gpu/pack-old-build.sh with PACK_TARGETS="gnio-run rma_test_2_gpu", see README.md) and
# e8c5dec's gnio-perf (.oldpack/old-e8c5dec.tgz). Every two-rank run under MPS (tests/gpu/concurrent-ranks.sh):
#  1. rma_test_2's 2-node filter (GNIO_NET=tcp, 8 s device timeouts) for each of PACKS;
#  2. the RMA latency table (2 ranks, one node) of LAT_NEW beside e8c5dec, LAT_RUNS interleaved;
#  3. the 64 MiB put from 16 and 1 blocks through the proxy for PUT_PACKS, 2 interleaved rounds;
#  4. rma_test_2's 2-node filter for LATE_PACKS.
#   OUT=... bash bench/results/2026-12-07b-gpu/diag-packs.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
at() { echo "$* at $((SECONDS - start)) s" | tee -a "$OUT/time.txt"; }
mkdir -p p/e8 && tar xzf .oldpack/old-e8c5dec.tgz -C p/e8
ldconfig -p | grep -q libucp.so.0 || ucx=$PWD/p/e8/.old/ucx
F='--gtest_filter=Rma.Put*:Rma.Get*:Rma.Atomics*:Rma.SignalsAndComparisons:Rma.BarrierWorld*'
nvidia-smi -L >"$OUT/gpu.txt" 2>&1
unpack() { d=$PWD/p/$1/.old && mkdir -p "$PWD/p/$1" && tar xzf .oldpack/old-$1.tgz -C "$PWD/p/$1" &&
  export LD_LIBRARY_PATH=$d${ucx:+:$ucx}; }
rma() {
  unpack "$1" || return
  GNIO_BACKEND=cuda GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=8 GNIO_NET=tcp timeout ${RMA_S:-90} \
    tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 --nodes 2 --timeout $((${RMA_S:-90} - 5)) -- \
    $d/rma_test_2_gpu "$F" >"$OUT/rma-$1.log" 2>&1
  at "rma $1 rc=$?"
}
for name in ${PACKS:-quiet head}; do rma $name; done
unpack ${LAT_NEW:-head} && run=$d/gnio-run newperf=$d/gnio-perf newlib=$LD_LIBRARY_PATH
for i in $(seq 1 ${LAT_RUNS:-3}); do
  for b in old new; do
    [ $((SECONDS - start)) -lt ${LAT_UNTIL:-330} ] || break 2
    if [ $b = old ]; then perf=p/e8/.old/gnio-perf; export LD_LIBRARY_PATH=$PWD/p/e8/.old${ucx:+:$ucx}
    else perf=$newperf; export LD_LIBRARY_PATH=$newlib; fi
    GNIO_BACKEND=cuda timeout 60 tests/gpu/concurrent-ranks.sh 2 $run -n 2 --timeout 55 -- \
      $perf rma --mode lat -b 8 -e 64K -f 8 --json "$OUT/rma-lat-$b-$i.json" >"$OUT/lat-$b-$i.log" 2>&1
    at "lat $b $i rc=$?"
  done
done
for rep in 1 2; do
  for name in ${PUT_PACKS:-quiet head}; do
    unpack $name || continue
    for nb in 16 1; do
      [ $((SECONDS - start)) -lt ${PUT_UNTIL:-470} ] || break 3
      GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 \
        --nodes 2 --timeout 35 -- $d/gnio-perf rma --op put --scope block --mode bw --blocks $nb \
        -b 64M -e 64M --reps 3 >"$OUT/put64-$name-b$nb-$rep.log" 2>&1
      at "put64 $name b$nb rep $rep rc=$?"
    done
  done
done
for name in ${LATE_PACKS:-}; do [ $((SECONDS - start)) -lt ${LATE_UNTIL:-480} ] && RMA_S=60 rma $name; done
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
