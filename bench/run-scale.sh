#!/usr/bin/env bash
# How one rank's threads, sockets, memory and creation time grow with the job (issue: scale), on
# the host backend with two ranks per simulated node (one per node at 2 ranks), so that every
# rank has remote peers through the network proxy. gnio-scale-probe at each size, JSON and log
# per size in $OUT, then the fit and projection (bench/scale-fit.py -> $OUT/scale.md).
#
#   BUILD=build OUT=bench/results/DATE-cpu-scale SIZES="2 4 8 16 32 64" bench/run-scale.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/out/scale}
mkdir -p "$out"
run=$build/tools/gnio-run/gnio-run
probe=$build/perf/scale/gnio-scale-probe
files=()
for n in ${SIZES:-2 4 8 16 32}; do
  nodes=$((n / 2))
  [ "$n" -le 2 ] && nodes=$n
  echo "== $n ranks on $nodes nodes"
  GNIO_BACKEND=host timeout "${STEP_TIMEOUT:-900}" "$run" -n "$n" --nodes "$nodes" --timeout 600 -- \
    "$probe" --reps "${REPS:-3}" --json "$out/scale-$n.json" >"$out/scale-$n.log" 2>&1 ||
    { echo "   failed (see $out/scale-$n.log)"; continue; }
  grep '^\[0\]' "$out/scale-$n.log" | sed 's/^\[0\] /   /'
  files+=("$out/scale-$n.json")
done
python3 "$root/bench/scale-fit.py" "${files[@]}" --markdown "$out/scale.md"
