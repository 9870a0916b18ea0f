#!/usr/bin/env bash
# Tuning sweep for the collectives' launch shape and algorithm thresholds on this machine's GPUs:
# runs `gnio-perf coll` (CUDA graphs, float32 sum, out of place, no NCCL) once per setting and
# prints one line per point, so that the defaults in src/coll/coll.cpp (dims_for) and
# GNIO_COLL_LL_MAX / GNIO_COLL_ONESHOT_MAX can be chosen from measurements:
#
#   bench/tune-coll.sh [shape|ll|direct|all]   # default: all
#
#   shape   large messages (4M..256M) for every collective, auto algorithm, under
#           GNIO_COLL_BLOCKS x GNIO_COLL_THREADS in {64,128,256} x {512,1024}
#   ll      LL forced (GNIO_ALGO=ll) from 16K to 512K, GNIO_COLL_BLOCKS in {16,32,64}
#   direct  oneshot and twoshot forced from 64K to 8M, GNIO_COLL_BLOCKS in {16,32,64,128}
#
# Output: "coll setting algo size_B time_us busbw_GBps" lines on stdout and in
# ${OUT:-bench/results/<UTC date>-<host>-tune}/tune.txt. Environment: BUILD (a build directory
# with gnio-run and gnio-perf, default ./build-bench), RANKS (default: number of GPUs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
host=$(hostname -s 2>/dev/null || hostname)
out=${OUT:-$root/bench/results/$(date -u +%F)-$host-tune}
ranks=${RANKS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)}
export NCCL_NVLS_ENABLE=0 GNIO_BACKEND=cuda
mkdir -p "$out"
colls="allreduce allgather reduce_scatter broadcast alltoall"

point() {  # point COLL SETTING ENV... -- gnio-perf options: one run, its rows as tuning lines
  local coll=$1 setting=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$build/tools/gnio-run/gnio-run" -n "$ranks" --timeout 120 --no-prefix -- \
    "$build/perf/gnio-perf/gnio-perf" coll --coll "$coll" -d f32 -o sum --inplace 0 "$@" 2>&1 \
    | awk -v c="$coll" -v s="$setting" '/^ +[0-9]/ { printf "%-14s %-22s %-8s %11s %9s %8s\n", c, s, $6, $1, $7, $9 }
                                       /wrong|error|Error/ { print "# " c " " s ": " $0 }' \
    | tee -a "$out/tune.txt"
}

what=${1:-all}
if [ "$what" = shape ] || [ "$what" = all ]; then
  for coll in $colls; do
    for b in 64 128 256; do
      for t in 512 1024; do
        point "$coll" "blocks=$b,threads=$t" GNIO_COLL_BLOCKS=$b GNIO_COLL_THREADS=$t -- \
          -b 4M -e 256M -f 4 -c 0
      done
    done
  done
fi
if [ "$what" = ll ] || [ "$what" = all ]; then
  for coll in $colls; do
    for b in 16 32 64; do
      point "$coll" "ll,blocks=$b" GNIO_ALGO=ll GNIO_COLL_LL_MAX=512K GNIO_COLL_BLOCKS=$b -- \
        -b 16K -e 512K -f 2 -c 0
    done
  done
fi
if [ "$what" = direct ] || [ "$what" = all ]; then
  for coll in allreduce broadcast; do
    for algo in oneshot twoshot; do
      for b in 16 32 64 128; do
        point "$coll" "$algo,blocks=$b" GNIO_ALGO=$algo GNIO_COLL_BLOCKS=$b -- -b 64K -e 8M -f 2 -c 0
      done
    done
  done
  for coll in allgather reduce_scatter alltoall; do
    for b in 16 32 64 128; do
      point "$coll" "oneshot,blocks=$b" GNIO_ALGO=oneshot GNIO_COLL_BLOCKS=$b -- -b 64K -e 8M -f 2 -c 0
    done
  done
fi
