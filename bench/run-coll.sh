#!/usr/bin/env bash
# gnio vs NCCL, collectives over the GPUs of this machine, in one command:
#
#   bench/run-coll.sh [gnio-perf coll options]   # default: the issue's sweep (below)
#   bench/run-coll.sh --quick                     # a short check that everything works
#
# Default sweep: allreduce, allgather, reduce_scatter, broadcast and alltoall, float32 sum,
# 8 B .. 1 GiB (factor 2), out of place, CUDA graphs of 20 calls, NCCL on the same buffers in the
# same process (--vs-nccl). One `gnio-perf coll` run per collective under `gnio-run -n RANKS`, so
# that one failure does not lose the others. Builds what is missing (gnio-run, gnio-perf).
#
# Everything goes to ${OUT:-bench/results/<UTC date>-<host>-coll}/: coll-<collective>.{txt,json},
# system.txt (GPUs, topology, build), coll.png and coll-allreduce.png (bench/plot_coll.py; needs
# matplotlib, skipped with a message otherwise). Exit status: non-zero when any run failed or
# reported a wrong element.
#
# Environment: OUT (results directory), BUILD (build directory, default ./build-bench), RANKS
# (default: the number of GPUs), COLLS (space-separated list, default as above), JOBS (build
# parallelism), GNIO_BENCH_NCCL_LIB (libnccl.so.2 to compare with; default: the Python
# environment's nvidia-nccl package, then the system's). NVLink multicast stays off:
# NCCL_NVLS_ENABLE=0 is set for every program started here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
host=$(hostname -s 2>/dev/null || hostname)
out=${OUT:-$root/bench/results/$(date -u +%F)-$host-coll}
if [ $# -eq 0 ]; then
  set -- -b 8 -e 1G -f 2 -d f32 -o sum --inplace 0 -G 20
fi
colls=${COLLS:-allreduce allgather reduce_scatter broadcast alltoall}

export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 GNIO_BACKEND=cuda
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
ranks=${RANKS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)}
if [ "$ranks" -lt 2 ]; then
  echo "run-coll.sh: needs at least 2 GPUs (found $ranks; set RANKS to override)" >&2
  exit 2
fi

# ---- build (incremental: cheap when nothing changed) ----
if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  mkdir -p "$build"
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGNIO_CUDA=ON \
    -DGNIO_BUILD_TESTS=OFF -DGNIO_BUILD_EXAMPLES=OFF >"$build/configure.log" 2>&1 \
    || { cat "$build/configure.log"; exit 1; }
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target gnio-run gnio-perf gnio-info \
  >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }
if [ -z "${GNIO_BENCH_NCCL_LIB:-}" ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  [ -n "$nccl_dir" ] && [ -f "$nccl_dir/lib/libnccl.so.2" ] \
    && export GNIO_BENCH_NCCL_LIB=$nccl_dir/lib/libnccl.so.2
fi

mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $host"
  echo "command: $0 $*   (RANKS=$ranks COLLS='$colls')"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "nccl: ${GNIO_BENCH_NCCL_LIB:-libnccl.so.2 from the system}"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
  nvidia-smi topo -m 2>/dev/null || true
} >"$out/system.txt" 2>&1

status=0
jsons=()
for coll in $colls; do
  echo "== $coll: gnio-run -n $ranks -- gnio-perf coll --coll $coll --vs-nccl $*" >&2
  start=$SECONDS
  set +e
  "$build/tools/gnio-run/gnio-run" -n "$ranks" --timeout 900 --no-prefix -- \
    "$build/perf/gnio-perf/gnio-perf" coll --coll "$coll" --vs-nccl "$@" \
    --json "$out/coll-$coll.json" 2>&1 | tee "$out/coll-$coll.txt"
  rc=${PIPESTATUS[0]}
  set -e
  echo "== $coll: exit status $rc after $((SECONDS - start)) s" >&2
  [ "$rc" -eq 0 ] || status=$rc
  [ -f "$out/coll-$coll.json" ] && jsons+=("$out/coll-$coll.json")
done

if [ ${#jsons[@]} -gt 0 ]; then
  if python3 -c 'import matplotlib' 2>/dev/null; then
    python3 "$root/bench/plot_coll.py" "${jsons[@]}" -o "$out/coll.png" || status=1
    [ -f "$out/coll-allreduce.json" ] && python3 "$root/bench/plot_coll.py" \
      "$out/coll-allreduce.json" --coll allreduce -o "$out/coll-allreduce.png" || true
  else
    echo "run-coll.sh: matplotlib missing, no plot (pip install matplotlib; then" \
         "bench/plot_coll.py $out/coll-*.json)" >&2
  fi
fi
echo "run-coll.sh: results in $out" >&2
exit "$status"
