#!/usr/bin/env bash
# Builds, on the CPU machine, what call-3.sh carries to the GPU machine (nothing is built there):
# build-carried/ with libgnio (cuda backend, sm_90), gnio-run, gnio-perf, gnio-tcp-floor, in
# tests/ the GPU test binaries that go through the proxy, and in libs/ the UCX and numa libraries
# libgnio links that the GPU machine lacks. All stripped (about 31 MB; the device tool carries
# 64 MiB). About 25 minutes on 2 cores from nothing (the collective kernel sets take most).
#   bash bench/results/2026-12-07f-gpu/make-carried.sh [BUILD_DIR]   (default /tmp/build-carried-src)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
b=${1:-/tmp/build-carried-src}
tests=(coll_fault_test_2_gpu coll_test_2_gpu channel_test_2_gpu rma_net_test_gpu
  rma_persistent_test_gpu rma_test_2_gpu stream_rma_test_3_gpu)
cmake -S "$root" -B "$b" -G Ninja -DGNIO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGNIO_GPU_TESTS=ON -DGNIO_BUILD_EXAMPLES=OFF >/dev/null
nice ninja -C "$b" -j2 gnio-run gnio-perf gnio-tcp-floor "${tests[@]}"
out=$root/build-carried
rm -rf "$out" && mkdir -p "$out/src" "$out/tests" "$out/libs"
cp -L "$b/src/libgnio.so.0" "$out/src/"
cp -L "$b/tools/gnio-run/gnio-run" "$b/perf/gnio-perf/gnio-perf" "$b/perf/probes/gnio-tcp-floor" "$out/"
for t in "${tests[@]}"; do cp -L "$(find "$b/tests" -type f -name "$t" | head -1)" "$out/tests/"; done
strip "$out/src/libgnio.so.0" "$out"/gnio-* "$out"/tests/*
ldd "$out/src/libgnio.so.0" | awk '/lib(ucp|ucs|uct|ucm|numa)\./ {print $3}' |
  while read -r lib; do cp -L "$lib" "$out/libs/"; done
du -sh "$out"
