#!/usr/bin/env bash
# scale_test.sh GNIO_RUN PROBE PYTHON CHECK OUT_DIR: the probe at 4 ranks on 2 simulated nodes and
# at 8 ranks on 4, then the check (scale_check.py) over their JSON; then 16 ranks on 16 nodes with
# the allreduce a ring (each rank talks to its two neighbours only), whose sockets must not grow
# with the job (connections on first use, GNIO_NET_CONNECT=lazy).
set -euo pipefail
run=$1 probe=$2 python=$3 check=$4 out=$5
mkdir -p "$out"
"$run" -n 4 --nodes 2 --timeout 120 -- "$probe" --reps 1 --json "$out/scale-4.json"
"$run" -n 8 --nodes 4 --timeout 120 -- "$probe" --reps 1 --json "$out/scale-8.json"
"$python" "$check" "$out/scale-4.json" "$out/scale-8.json"
GNIO_COLL_REMOTE_ONESHOT_MAX=0 "$run" -n 16 --nodes 16 --timeout 120 -- "$probe" --reps 1 \
  --json "$out/scale-16-ring.json"
"$python" "$check" --ring "$out/scale-16-ring.json"
