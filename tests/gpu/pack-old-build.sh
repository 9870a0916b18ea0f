#!/usr/bin/env bash
# Builds an older revision's libgnio.so.0 + gnio-perf (cuda backend, sm_90) on this machine and
# packs them, stripped, for session-run.sh's vs-old step on the GPU machine, so that the GPU's
# scarce time does not go to compiling the old build:
#
#   tests/gpu/pack-old-build.sh REV [PACK]      # PACK default: .oldpack/old-<short rev>.tgz
#
# The pack holds one folder, .old/ (libgnio.so.0, gnio-perf, and in .old/ucx/ the UCX libraries
# the build linked, for a GPU machine without them). Carry the pack's folder with the device call
# and unpack it there before vs-old:
#
#   tar xzf .oldpack/old-<rev>.tgz
#   ldconfig -p | grep -q libucp.so.0 || export LD_LIBRARY_PATH=$PWD/.old/ucx
#   tests/gpu/session-run.sh build vs-old
#
# PACK_TARGETS adds targets to the pack (gnio-run, test binaries such as rma_test_2_gpu: a test
# needs -DGNIO_GPU_TESTS=ON, which this build sets), so a GPU machine runs an older revision's
# tests without building them; PACK_PATCH applies a patch file to REV first (a change not
# committed, measured beside REV itself).
#
# Needs nvcc (the CUDA toolkit); takes minutes on 2 cores (about 12 for a build from before the
# collective kernel sets, 3 after them).
set -euo pipefail
rev=${1:?usage: pack-old-build.sh REV [PACK]}
root=$(cd "$(dirname "$0")/../.." && pwd)
short=$(git -C "$root" rev-parse --short "$rev")
pack=${2:-$root/.oldpack/old-$short.tgz}
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

git -C "$root" worktree add --detach "$work/src" "$rev" >/dev/null
[ -n "${PACK_PATCH:-}" ] && git -C "$work/src" apply "$(realpath "$PACK_PATCH")"
extra=(${PACK_TARGETS:-})
bash "$work/src/scripts/build.sh" "$work/build" -DGNIO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGNIO_WERROR=OFF ${extra[@]:+-DGNIO_GPU_TESTS=ON} --target gnio gnio-perf "${extra[@]}"

mkdir -p "$work/pack/.old/ucx"
# gnio-perf moved from tools/ to perf/ on 2026-12-06: an older revision has it in tools/.
perf=$work/build/perf/gnio-perf/gnio-perf
[ -x "$perf" ] || perf=$work/build/tools/gnio-perf/gnio-perf
cp -L "$work/build/src/libgnio.so.0" "$perf" "$work/pack/.old/"
for t in "${extra[@]}"; do
  cp -L "$(find "$work/build" -type f -name "$t" -perm -u+x | head -1)" "$work/pack/.old/"
done
find "$work/pack/.old" -maxdepth 1 -type f -exec strip {} +
# The UCX libraries (and what they need) the old library linked, if any.
ldd "$work/pack/.old/libgnio.so.0" | awk '/lib(ucp|ucs|uct|ucm|numa)\./ {print $3}' |
  while read -r lib; do cp -L "$lib" "$work/pack/.old/ucx/"; done
for lib in "$work"/pack/.old/ucx/*; do
  [ -e "$lib" ] || continue
  ldd "$lib" | awk '/lib(ucs|uct|ucm|numa)\./ {print $3}' |
    while read -r dep; do cp -nL "$dep" "$work/pack/.old/ucx/"; done
done
mkdir -p "$(dirname "$pack")"
tar czf "$pack" -C "$work/pack" .old
echo "packed $rev ($short) into $pack ($(du -h "$pack" | cut -f1))"
