#!/usr/bin/env bash
# Configures and builds gnio into a build directory:
#   scripts/build.sh [BUILD_DIR] [cmake args...] [--target TARGET...]
# The cuda backend is built when nvcc is found (on PATH or in /usr/local/cuda/bin).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Arguments up to --target go to the configure step; names after --target are what to build.
configure_args=() targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--target" ]; then shift; targets=(--target "$@"); break; fi
  configure_args+=("$1"); shift
done
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${configure_args[@]}" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep -E "^-- gnio" "$build.configure.log" || true
cmake --build "$build" -j "${JOBS:-$(nproc)}" "${targets[@]}"
