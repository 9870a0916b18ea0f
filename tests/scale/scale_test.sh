#!/usr/bin/env bash
# scale_test.sh GNIO_RUN PROBE PYTHON CHECK OUT_DIR: the probe at 4 ranks on 2 simulated nodes and
# at 8 ranks on 4, then the check (scale_check.py) over their JSON.
set -euo pipefail
run=$1 probe=$2 python=$3 check=$4 out=$5
mkdir -p "$out"
"$run" -n 4 --nodes 2 --timeout 120 -- "$probe" --reps 1 --json "$out/scale-4.json"
"$run" -n 8 --nodes 4 --timeout 120 -- "$probe" --reps 1 --json "$out/scale-8.json"
"$python" "$check" "$out/scale-4.json" "$out/scale-8.json"
