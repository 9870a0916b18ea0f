#!/usr/bin/env bash
# This build beside an older one on the host backend (CPU threads), 2 ranks on one node: RUNS
# interleaved runs (old, new, old, ...) of the RMA latency table (8 B-64 KiB, 200 operations per
# launch, 11 launches) and the eager allreduce 8 B-1 MiB (50 calls, 11 measurements), then
# bench/compare-builds.py's table (median over runs of each run's median) in OUT/compare.md.
#
#   bench/run-host-vs-old.sh OLD_BUILD NEW_BUILD [OUT] [RUNS]
#
# OLD_BUILD / NEW_BUILD: build folders of `scripts/build.sh <dir> -DGNIO_CUDA=OFF` (the same build
# type); an older tree's gnio-perf may sit in tools/ rather than perf/. Keep the machine quiet.
set -euo pipefail
old=${1:?usage: run-host-vs-old.sh OLD_BUILD NEW_BUILD [OUT] [RUNS]}
new=${2:?usage: run-host-vs-old.sh OLD_BUILD NEW_BUILD [OUT] [RUNS]}
out=${3:-host-vs-old}
runs=${4:-9}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"

tool() {  # tool BUILD NAME: the build's gnio-run or gnio-perf
  local f
  for f in "$1/tools/$2/$2" "$1/perf/$2/$2"; do
    [ -x "$f" ] && { echo "$f"; return; }
  done
  echo "run-host-vs-old.sh: no $2 in $1" >&2
  exit 2
}

for i in $(seq 1 "$runs"); do
  for b in old new; do
    dir=$old
    [ "$b" = new ] && dir=$new
    run=$(tool "$dir" gnio-run)
    perf=$(tool "$dir" gnio-perf)
    export LD_LIBRARY_PATH=$dir/src
    timeout 300 "$run" -n 2 -- "$perf" rma --mode lat -b 8 -e 64K -f 8 -n 200 --reps 11 \
      --json "$out/rma-$b-$i.json" >"$out/rma-$b-$i.log" 2>&1
    timeout 300 "$run" -n 2 -- "$perf" coll --coll allreduce -b 8 -e 1M -f 8 -n 50 --reps 11 \
      -d f32 -o sum --inplace 0 --json "$out/coll-$b-$i.json" >"$out/coll-$b-$i.log" 2>&1
    # From 8 B in steps of 8 the sweep ends at 256 KiB; 1 MiB runs on its own.
    timeout 300 "$run" -n 2 -- "$perf" coll --coll allreduce -b 1M -e 1M -n 50 --reps 11 \
      -d f32 -o sum --inplace 0 --json "$out/top-$b-$i.json" >"$out/top-$b-$i.log" 2>&1
  done
  echo "run $i of $runs done"
done
python3 "$root/bench/compare-builds.py" --old "$out/*-old-*.json" --new "$out/*-new-*.json" \
  --markdown "$out/compare.md" --title "host backend: new build vs old build, 2 ranks on one node"
