#!/usr/bin/env bash
# The device call after the change to proxy waits (one thread of the GPU reads the ring's
# host-memory counters at a time, the others read its copy in device memory): the whole build,
# the 64 MiB put from 1, 16 and 64 blocks beside head-before-the-change's pack
# (.oldpack/old-head.tgz, d7db7d0) in interleaved rounds, every GPU test (the two-rank ones under
# MPS), then the RMA latency table beside e8c5dec (.oldpack/old-e8c5dec.tgz) as time allows.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07c-gpu-put16/call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-580} - (SECONDS - start))); }
at() { echo "$* at $((SECONDS - start)) s" | tee -a "$OUT/time.txt"; }
R=$PWD/build-gpu/tools/gnio-run/gnio-run P=$PWD/build-gpu/perf/gnio-perf/gnio-perf
X='^(perf_coll_kernel_quick_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
nvidia-smi -L >"$OUT/gpu.txt" 2>&1
OUT=$OUT/a timeout 230 tests/gpu/session-run.sh build
at "build done"
x=$OUT/extra && mkdir -p "$x"
for n in head e8c5dec; do mkdir -p p/$n && tar xzf .oldpack/old-$n.tgz -C p/$n; done
ldconfig -p | grep -q libucp.so.0 || ucx=$PWD/p/e8c5dec/.old/ucx
for rep in 1 2; do
  for b in new head; do
    if [ $b = new ]; then run=$R perf=$P lib=${ucx:-}
    else d=$PWD/p/head/.old run=$d/gnio-run perf=$d/gnio-perf lib=$d${ucx:+:$ucx}; fi
    for nb in 1 16 64; do
      [ "$(left)" -gt 400 ] || break 3
      LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 \
        $run -n 2 --nodes 2 --timeout 35 -- $perf rma --op put --scope block --mode bw \
        --blocks $nb -b 64M -e 64M --reps 3 >"$x/put64-$b-b$nb-$rep.log" 2>&1
      at "put64 $b b$nb rep $rep rc=$?"
    done
  done
done
OUT=$OUT/a SUITE_EXCLUDE="$X" timeout $(($(left) - 100)) tests/gpu/session-run.sh suite
at "suite a done"
OUT=$OUT/b SUITE_FILTER="$X" SUITE_MPS=1 timeout $(($(left) - 10)) tests/gpu/session-run.sh suite
at "suite b done"
for i in 1 2; do
  for b in old new; do
    [ "$(left)" -gt 12 ] || break 2
    if [ $b = old ]; then perf=$PWD/p/e8c5dec/.old/gnio-perf lib=$PWD/p/e8c5dec/.old${ucx:+:$ucx}
    else perf=$P lib=${ucx:-}; fi
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
      --timeout 18 -- $perf rma --mode lat -b 8 -e 64K -f 8 --json "$x/rma-lat-$b-$i.json" \
      >"$x/lat-$b-$i.log" 2>&1
    at "lat $b $i rc=$?"
  done
done
cp "$OUT/time.txt" "$x/"
tar czf "$OUT/extra.tgz" -C "$OUT" extra
rm -rf "$OUT/a/r" "$OUT/b/r" "$x"
