#!/usr/bin/env bash
# Builds REV (with PATCH applied, if given) on this machine with nvcc for sm_90 and packs
# libgnio.so.0, gnio-run, rma_test_2_gpu and gnio-perf, stripped, into .oldpack/t-NAME.tgz for
# diag-packs.sh, so that the GPU machine runs them without a build.
#   bench/results/2026-12-07b-gpu/pack-test-build.sh REV NAME [PATCH]
set -euo pipefail
rev=${1:?usage: pack-test-build.sh REV NAME [PATCH]} name=${2:?NAME} patchf=${3:-}
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/src" "$rev" >/dev/null
[ -n "$patchf" ] && git -C "$work/src" apply "$(realpath "$patchf")"
bash "$work/src/scripts/build.sh" "$work/build" -DGNIO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGNIO_GPU_TESTS=ON -DGNIO_WERROR=OFF --target gnio gnio-run rma_test_2_gpu gnio-perf
mkdir -p "$work/pack/t"
cp -L "$work/build/src/libgnio.so.0" "$work/build/tools/gnio-run/gnio-run" \
  "$work/build/tests/rma/rma_test_2_gpu" "$work/build/perf/gnio-perf/gnio-perf" "$work/pack/t/"
strip "$work"/pack/t/*
mkdir -p "$root/.oldpack"
tar czf "$root/.oldpack/t-$name.tgz" -C "$work/pack" t
echo "packed $rev${patchf:+ + $patchf} into .oldpack/t-$name.tgz"
