#!/usr/bin/env bash
# Runs a GPU test whose ranks must run their kernels at the same time.
#
#   tests/gpu/concurrent-ranks.sh RANKS command [args...]
#
# Ranks that share a GPU without MPS take turns in time slices of about 2 ms, so a test whose
# ranks wait on each other inside kernels (a contended atomic loop, a timed collective sweep)
# outlasts its timeout. When the machine has fewer GPUs than RANKS and no MPS server is in use
# already (CUDA_MPS_PIPE_DIRECTORY unset), this starts a private MPS control daemon for the one
# command and stops it afterwards, whatever the command's outcome. Otherwise it just runs the
# command. ctest runs these tests alone (RUN_SERIAL), so the daemon serves no other test.
#
# GNIO_TEST_NO_MPS=1 runs the command without MPS (e.g. under compute-sanitizer, which does not
# support MPS clients).
set -uo pipefail

ranks=${1:?usage: concurrent-ranks.sh RANKS command [args...]}
shift

gpus() {
  if [[ -n ${CUDA_VISIBLE_DEVICES+x} ]]; then
    local ids=${CUDA_VISIBLE_DEVICES//,/ }
    set -- $ids
    echo $#
  else
    nvidia-smi -L 2>/dev/null | grep -c '^GPU '
  fi
}

if [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} || ${GNIO_TEST_NO_MPS:-0} == 1 ]] ||
   ! command -v nvidia-cuda-mps-control >/dev/null || (( $(gpus) >= ranks )); then
  exec "$@"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/gnio-mps.XXXXXX") || exit 2
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! nvidia-cuda-mps-control -d; then
  echo "concurrent-ranks.sh: could not start an MPS control daemon; running without it" >&2
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  rm -rf "$dir"
  exec "$@"
fi
stop_mps() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  # The daemon exits once its server is gone; give it a moment before removing its pipes.
  for _ in $(seq 50); do pgrep -f "nvidia-cuda-mps-control -d" >/dev/null || break; sleep 0.1; done
  rm -rf "$dir"
}
trap stop_mps EXIT
trap 'exit 143' TERM INT
echo "concurrent-ranks.sh: $ranks ranks on $(gpus) GPU(s): running under a private MPS daemon ($dir)"
"$@"
