#!/usr/bin/env bash
# Second device call of 2026-12-07 (on the machine call-one.sh built on, or building first): this
# build beside e8c5dec's (before the issue-28 commits, the batched delivery agent and the striped
# puts in flight together; packed here by tests/gpu/pack-old-build.sh e8c5dec):
#  1. the 64 MiB put through the tcp proxy from 1 and 16 blocks, new and old interleaved, 2 runs
#     each, each under its own MPS daemon (2 ranks as 2 nodes on one GPU);
#  2. the RMA latency table, the stream allreduce 8 B-64 KiB and the in-kernel allreduce, 2 ranks
#     under MPS (session-run.sh vs-old, RUNS runs);
#  3. the issue-22 figures beside raw TCP (net-one-gpu: floor, put/put_signal latency);
#  4. the delivery agent against a launch per batch (net-ab), as time allows.
#   OUT=... CALL_S=570 bash bench/results/2026-12-07-gpu-verify/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
left() { echo $((${CALL_S:-570} - (SECONDS - start))); }
B=build-gpu R=build-gpu/tools/gnio-run/gnio-run P=build-gpu/perf/gnio-perf/gnio-perf
[ -x $P ] ||
  BUILD_TARGETS="gnio-run gnio-perf gnio-tcp-floor" timeout 200 tests/gpu/session-run.sh build-perf
tar xzf .oldpack/old-e8c5dec.tgz
ldconfig -p | grep -q libucp.so.0 || export LD_LIBRARY_PATH=$PWD/.old/ucx
mkdir -p "$OUT/r/put64"
for i in 1 2; do
  for b in new old; do
    perf=$P lib=()
    [ $b = old ] && perf=$PWD/.old/gnio-perf lib=(LD_LIBRARY_PATH="$PWD/.old${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    for nb in 1 16; do
      env "${lib[@]}" GNIO_NET=tcp timeout 60 tests/gpu/concurrent-ranks.sh 2 $R -n 2 --nodes 2 \
        --timeout 50 -- $perf rma --op put --scope block --mode bw --blocks $nb -b 64M -e 64M \
        --reps 3 >"$OUT/r/put64/$b-b$nb-$i.log" 2>&1
      echo "$b b$nb $i: $(grep -E '^\[0\] +67108864' "$OUT/r/put64/$b-b$nb-$i.log")" >>"$OUT/r/put64/summary.txt"
    done
  done
done
echo "put64 done at $((SECONDS - start)) s" >"$OUT/time.txt"
VS_OLD_RMA=1 VS_OLD_COLLS=allreduce VS_OLD_MAX=64K VS_OLD_F=8 VS_OLD_TOP= VS_OLD_RUNS=${RUNS:-3} \
  timeout $(($(left) - 120)) tests/gpu/session-run.sh vs-old
echo "vs-old done at $((SECONDS - start)) s" >>"$OUT/time.txt"
l=$(left)
[ "$l" -gt 60 ] && NET_PARTS="lat" timeout $((l - 15)) tests/gpu/session-run.sh net-one-gpu
echo "net-one-gpu done at $((SECONDS - start)) s" >>"$OUT/time.txt"
l=$(left)
[ "$l" -gt 90 ] && NET_AB_RUNS=1 timeout $((l - 10)) tests/gpu/session-run.sh net-ab
echo "call took $((SECONDS - start)) s" >>"$OUT/time.txt"
cp "$OUT/time.txt" "$OUT/r/"
tar czf "$OUT/all.tgz" -C "$OUT" r
rm -rf "$OUT/r"
