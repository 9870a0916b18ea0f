#!/usr/bin/env bash
# The README's first command: installs what is missing, builds gnio, and runs the main job —
# gnio-perf on 2 ranks, on the GPUs when there are at least two, else on the host backend.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh"
BUILD_TYPE=Release "$root/scripts/build.sh" "$root/build" -DGNIO_BUILD_TESTS=OFF
bin=$root/build/tools
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
export NCCL_NVLS_ENABLE=0
if [ "$gpus" -ge 2 ]; then
  echo "gnio quickstart: $gpus GPUs found; running gnio-perf on 2 GPUs"
  export GNIO_BACKEND=cuda
else
  echo "gnio quickstart: no pair of GPUs found; running gnio-perf on the host backend (CPU threads)"
  export GNIO_BACKEND=host
fi
"$bin/gnio-run/gnio-run" -n 2 -- "$bin/gnio-perf/gnio-perf" ${GNIO_PERF_ARGS:-rma --quick}
