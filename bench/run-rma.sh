#!/usr/bin/env bash
# gnio vs NVSHMEM, one-sided operations between two GPUs of this machine, in one command:
#
#   bench/run-rma.sh [gnio-perf rma options]     # default: the full sweep, 8 B .. 1 GiB
#   bench/run-rma.sh --quick                      # a short check that everything works
#
# Builds what is missing (gnio-run, gnio-perf and, when NVSHMEM is found, nvshmem-perf), runs
# `gnio-perf rma` and `nvshmem-perf rma` with the same options under `gnio-run -n 2`, then
# bench/compare.py, and prints the side-by-side table last. Everything goes to
# ${OUT:-bench/results/<UTC date>-<host>}/: gnio-rma.{txt,json}, nvshmem-rma.{txt,json},
# compare-rma.{txt,md}, system.txt (GPUs, topology, build).
#
# Environment: OUT (results directory), BUILD (build directory, default ./build-bench),
# NVSHMEM_HOME (NVSHMEM installation; default: the nvidia-nvshmem Python wheel), JOBS (build
# parallelism). NVLink multicast stays off: NCCL_NVLS_ENABLE=0 and NVSHMEM_DISABLE_NVLS=1 are set
# for every program started here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
host=$(hostname -s 2>/dev/null || hostname)
out=${OUT:-$root/bench/results/$(date -u +%F)-$host}
if [ $# -eq 0 ]; then
  set -- -b 8 -e 1G -f 2
fi

export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 GNIO_BACKEND=cuda
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# ---- build (incremental: cheap when nothing changed) ----
if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  mkdir -p "$build"
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGNIO_CUDA=ON \
    -DGNIO_BUILD_TESTS=OFF -DGNIO_BUILD_EXAMPLES=OFF ${NVSHMEM_HOME:+-DNVSHMEM_HOME="$NVSHMEM_HOME"} \
    >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
  grep -E "^-- (gnio|nvshmem-perf)" "$build/configure.log" || true
fi
targets=(gnio-run gnio-perf gnio-info)
have_nvshmem=0
if cmake --build "$build" --target help 2>/dev/null | grep -q 'nvshmem-perf'; then
  targets+=(nvshmem-perf)
  have_nvshmem=1
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" >"$build/build.log" 2>&1 \
  || { tail -50 "$build/build.log"; exit 1; }

mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $host"
  echo "command: $0 $*"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (modified)')"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
  nvidia-smi topo -m 2>/dev/null || true
  "$build/tools/gnio-info/gnio-info" --no-comm 2>/dev/null | head -40 || true
} >"$out/system.txt" 2>&1

run() {  # run NAME PROGRAM: one benchmark under gnio-run, its output to the terminal and a file
  local name=$1 program=$2
  echo "== $name: gnio-run -n 2 -- $(basename "$program") rma ${*:3}" >&2
  local start=$SECONDS
  set +e
  "$build/tools/gnio-run/gnio-run" -n 2 --timeout 900 --no-prefix -- "$program" rma "${@:3}" \
    --json "$out/$name.json" 2>&1 | tee "$out/$name.txt"
  local status=${PIPESTATUS[0]}
  set -e
  echo "== $name: exit status $status after $((SECONDS - start)) s" >&2
  return "$status"
}

status=0
run gnio-rma "$build/perf/gnio-perf/gnio-perf" "$@" || status=$?
if [ "$have_nvshmem" = 1 ]; then
  run nvshmem-rma "$build/perf/nvshmem/nvshmem-perf" "$@" || status=$?
  if [ -f "$out/gnio-rma.json" ] && [ -f "$out/nvshmem-rma.json" ]; then
    echo >&2
    python3 "$root/bench/compare.py" "$out/gnio-rma.json" "$out/nvshmem-rma.json" \
      --markdown "$out/compare-rma.md" >"$out/compare-rma.txt" || status=$?
    cat "$out/compare-rma.txt"
  fi
else
  echo "run-rma.sh: nvshmem-perf was not built (NVSHMEM not found; see $build/configure.log):" \
       "gnio's results only" >&2
fi
echo "run-rma.sh: results in $out" >&2
exit "$status"
