#!/usr/bin/env bash
# The one device call of 2026-12-07e, with the session's last ~150 s of device time: no build
# there (build-gpu is built on the CPU machine and carried, its libraries found through
# LD_LIBRARY_PATH), no test suite. A smoke of this tree's proxy changes (the shared ticket ledger
# and open-request table in tcp and ucx, ucx's teardown) on one GPU, 2 ranks as 2 nodes under MPS:
# put_signal one way 8 B-4 KiB and a 64 MiB put from 16 blocks, each over tcp and over ucx (UCX
# without CUDA here: the staged path, request messages per chunk), gnio-perf checking every byte
# (#wrong); the raw TCP floor first.
#   OUT=... CALL_S=150 bash bench/results/2026-12-07e-gpu/call.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
mkdir -p p/ucx && tar xzf .oldpack/ucx-libs.tgz -C p/ucx
lib=$PWD/build-gpu/src:/usr/local/cuda/lib64
ldconfig -p | grep -q libucp.so.0 || lib=$lib:$PWD/p/ucx
timeout 30 env LD_LIBRARY_PATH=$lib build-gpu/perf/probes/gnio-tcp-floor --bytes 256M \
  >"$x/floor.log" 2>&1
at "floor rc=$?"
run() {  # NAME NET gnio-perf-args...
  local name=$1 net=$2
  shift 2
  LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda GNIO_NET=$net timeout 40 tests/gpu/concurrent-ranks.sh 2 \
    "$R" -n 2 --nodes 2 --timeout 35 -- "$P" "$@" >"$x/$name.log" 2>&1
  at "$name rc=$?"
}
for net in tcp ucx; do
  [ "$(left)" -gt 25 ] || break
  run lat-$net $net rma --op put_signal --scope thread --mode lat -b 8 -e 4096 -f 8 --reps 3
  [ "$(left)" -gt 25 ] || break
  run bw-$net $net rma --op put --scope block --mode bw --blocks 16 -b 64M -e 64M --reps 5
done
finish
