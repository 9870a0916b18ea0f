#!/usr/bin/env bash
# The first device call of a session on this tree: the whole build and every GPU test (those whose
# two ranks must run at once on one GPU under MPS), then as time allows the 64 MiB put from 1
# and 16 blocks beside e8c5dec's build (one run each), then the RMA latency table beside it (2
# interleaved runs), each two-rank run under MPS.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07-gpu-verify/call-one.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-580} - (SECONDS - start))); }
B=build-gpu R=build-gpu/tools/gnio-run/gnio-run P=build-gpu/perf/gnio-perf/gnio-perf
X='^(perf_coll_kernel_quick_gpu|coll_test_4_2nodes_gpu|coll_pieces_mixed_staging_2_gpu|rma_test_2nodes_gpu|coll_test_4_2nodes_hier_gpu)$'
OUT=$OUT/a timeout 230 tests/gpu/session-run.sh build
echo "build done at $((SECONDS - start)) s" >"$OUT/time.txt"
OUT=$OUT/a SUITE_EXCLUDE="$X" timeout $(($(left) - 60)) tests/gpu/session-run.sh suite
echo "suite a done at $((SECONDS - start)) s" >>"$OUT/time.txt"
OUT=$OUT/b SUITE_FILTER="$X" SUITE_MPS=1 timeout $(($(left) - 5)) tests/gpu/session-run.sh suite
echo "suite b done at $((SECONDS - start)) s" >>"$OUT/time.txt"
x=$OUT/extra
mkdir -p "$x"
tar xzf .oldpack/old-e8c5dec.tgz
ldconfig -p | grep -q libucp.so.0 || export LD_LIBRARY_PATH=$PWD/.old/ucx
for b in new old; do
  perf=$P lib=()
  [ $b = old ] && perf=$PWD/.old/gnio-perf lib=(LD_LIBRARY_PATH="$PWD/.old${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  for nb in 16 1; do
    [ "$(left)" -gt 30 ] || break 2
    env "${lib[@]}" GNIO_NET=tcp timeout 40 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
      --timeout 35 -- $perf rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M \
      --reps 3 >"$x/put64-$b-b$nb.log" 2>&1
  done
done
echo "put64 done at $((SECONDS - start)) s" >>"$OUT/time.txt"
l=$(left)
[ "$l" -gt 60 ] && OUT=$OUT/c VS_OLD_RMA=1 VS_OLD_COLLS=allreduce VS_OLD_MAX=8 VS_OLD_TOP= \
  VS_OLD_KERNEL=0 VS_OLD_RUNS=2 timeout $((l - 5)) tests/gpu/session-run.sh vs-old
echo "call took $((SECONDS - start)) s" >>"$OUT/time.txt"
cp "$OUT/time.txt" "$x/"
nvidia-smi -L >"$x/gpu.txt" 2>&1
tar czf "$OUT/extra.tgz" -C "$OUT" extra
rm -rf "$OUT/a/r" "$OUT/b/r" "$OUT/c/r" "$x"
