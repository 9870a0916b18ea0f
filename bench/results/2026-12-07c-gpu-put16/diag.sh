#!/usr/bin/env bash
# Why a 64 MiB put from 16 blocks runs 4x slower than from 1 block on the GPU (2 ranks as 2 nodes,
# tcp, MPS), with no build on the GPU machine: head's pack (.oldpack/old-head.tgz, made by
# tests/gpu/pack-old-build.sh) and e8c5dec's for the atomics latency. Steps:
#  1. the raw-TCP floor (perf/probes/gnio-tcp-floor --quick, built on the CPU machine: .oldpack/tcp-floor);
#  2. the 64 MiB put, 1 and 16 blocks, with GNIO_PROXY_STATS=1 (per-connection send/receive/deliver
#     times), then 16 blocks with one setting changed at a time (VARIANTS);
#  3. the atomics latency of e8c5dec and head at two heap sizes, interleaved (LAT_RUNS rounds):
#     whether the +20 ns seen for head's fetch_add follows the build or the placement.
#   OUT=... bash bench/results/2026-12-07c-gpu-put16/diag.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
start=$SECONDS
at() { echo "$* at $((SECONDS - start)) s" | tee -a "$OUT/time.txt"; }
nvidia-smi -L >"$OUT/gpu.txt" 2>&1
for n in head e8c5dec; do mkdir -p p/$n && tar xzf .oldpack/old-$n.tgz -C p/$n; done
ldconfig -p | grep -q libucp.so.0 || ucx=$PWD/p/e8c5dec/.old/ucx
timeout 60 .oldpack/tcp-floor --quick --json "$OUT/floor.json" >"$OUT/floor.log" 2>&1
at "floor rc=$?"
d=$PWD/p/head/.old
put() {  # put NAME BLOCKS SIZE [VAR=VALUE...]
  local name=$1 nb=$2 size=$3; shift 3
  env "$@" LD_LIBRARY_PATH=$d${ucx:+:$ucx} GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_PROXY_STATS=1 \
    timeout 45 tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 --nodes 2 --timeout 40 -- \
    $d/gnio-perf rma --op put --scope block --mode bw --blocks $nb -b $size -e $size --reps 3 \
    >"$OUT/put-$name.log" 2>&1
  at "put $name rc=$?"
}
put b1 1 64M
put b16 16 64M
put b1-again 1 64M
put b16-again 16 64M
put b4 4 64M
put b16-nostripe 16 64M GNIO_NET_STRIPE_MIN=128M
put b16-stripe1m 16 64M GNIO_NET_STRIPE_MIN=1M
put b16-chunk4m 16 64M GNIO_PROXY_CHUNK=4M
put b16-socks8 16 64M GNIO_NET_NSOCKS=8
put b16-spin 16 64M GNIO_PROXY_SPIN_US=100000
put b64 64 64M
for i in $(seq 1 ${LAT_RUNS:-3}); do
  for b in e8c5dec head; do
    for hs in 256M 1G; do
      [ $((SECONDS - start)) -lt ${LAT_UNTIL:-240} ] || break 3
      LD_LIBRARY_PATH=$PWD/p/$b/.old${ucx:+:$ucx} GNIO_BACKEND=cuda GNIO_HEAP_SIZE=$hs timeout 40 \
        tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 --timeout 35 -- p/$b/.old/gnio-perf rma \
        --op atomic --mode lat --json "$OUT/atomic-$b-$hs-$i.json" >"$OUT/atomic-$b-$hs-$i.log" 2>&1
      at "atomic $b $hs $i rc=$?"
    done
  done
done
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
