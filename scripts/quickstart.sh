#!/usr/bin/env bash
# The README's first command: installs what is missing, builds gnio, and runs the main job —
# gnio-perf on 2 ranks, on the GPUs when there are at least two, else on the host backend.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh"
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
# Without a pair of GPUs the job runs on the host backend, so the build leaves CUDA out: the
# collectives' GPU kernels alone take over 20 minutes to compile on a small machine.
cuda=AUTO
[ "$gpus" -ge 2 ] || cuda=OFF
BUILD_TYPE=Release "$root/scripts/build.sh" "$root/build" -DGNIO_BUILD_TESTS=OFF -DGNIO_CUDA=$cuda
b=$root/build
export NCCL_NVLS_ENABLE=0
if [ "$gpus" -ge 2 ]; then
  echo "gnio quickstart: $gpus GPUs found; running gnio-perf on 2 GPUs"
  export GNIO_BACKEND=cuda
else
  echo "gnio quickstart: no pair of GPUs found; running gnio-perf on the host backend (CPU threads)"
  export GNIO_BACKEND=host
fi
run() { "$b/tools/gnio-run/gnio-run" -n 2 -- "$b/perf/gnio-perf/gnio-perf" "$@"; }
if [ -n "${GNIO_PERF_ARGS:-}" ]; then
  run $GNIO_PERF_ARGS
else
  # The device API's one-sided operations, then allreduce (every type and operator).
  run rma --quick
  run coll --coll allreduce -d all -o all --quick
fi
