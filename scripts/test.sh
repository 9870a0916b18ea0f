#!/usr/bin/env bash
# The README's second command: installs what is missing, builds gnio with warnings as errors,
# runs the whole test suite, the Python package's suite (pip install . in a virtual
# environment), the libFuzzer targets briefly, then the ThreadSanitizer and
# AddressSanitizer+UBSan builds of the host-backend suite. Exits non-zero on any failure. Logs go
# to build*/Testing (fuzzers: build-fuzz/*.log). Ends with a table of every stage's wall time.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the main build's tests only (no sanitizer builds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1
export NCCL_NVLS_ENABLE=0
failed=()
stage_names=() stage_secs=() stage_results=()
# stage NAME command...: runs one stage, records its wall time and outcome (a failed stage is
# recorded and the script goes on, so that one run reports every failure).
stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "=== gnio: $name ($(date -u +%H:%M:%S), ${SECONDS}s in) ==="
  "$@" || rc=$?
  stage_names+=("$name")
  stage_secs+=($((SECONDS - start)))
  if [ "$rc" = 0 ]; then stage_results+=(ok); else stage_results+=("FAILED ($rc)"); failed+=("$name"); fi
}
print_stages() {
  echo
  echo "gnio test stages (wall time, $(nproc) cores):"
  printf '  %-24s %7s  %s\n' stage seconds result
  local i
  for i in "${!stage_names[@]}"; do
    printf '  %-24s %7d  %s\n' "${stage_names[$i]}" "${stage_secs[$i]}" "${stage_results[$i]}"
  done
  printf '  %-24s %7d\n' total "$SECONDS"
}
trap print_stages EXIT

# Test builds keep line tables only (-g1): stack traces and sanitizer reports still name file and
# line, and the compiler does a third less work than with full debug information. The sanitizer
# builds compile at -O1 as well (their documentation's advice; half the compile time of -O2 -g).
test_flags=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
sanitizer_flags=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
run_suite() {  # build_dir ctest-args...
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 1200 -j "${TEST_JOBS:-2}" "$@")
}
stage setup-deps "$root/scripts/setup-deps.sh"
# Layering (scripts/check-layers.py): no file includes a header of a layer above it, another
# backend's private header, or casts to a concrete backend.
stage layers python3 "$root/scripts/check-layers.py"
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
if [ "$gpus" -gt 0 ]; then
  # A GPU machine: one build with the cuda backend; its GPU-labelled tests run too.
  stage build "$root/scripts/build.sh" "$root/build" "${test_flags[@]}" -DGNIO_WERROR=ON -DGNIO_GPU_TESTS=ON
  stage tests run_suite "$root/build"
else
  # No GPU: the suite runs on the host backend, so the main build leaves CUDA out (fast), and a
  # second build only compiles the CUDA code (library, gnio-perf, the NCCL drop-in) to keep it compiling.
  stage build "$root/scripts/build.sh" "$root/build" "${test_flags[@]}" -DGNIO_WERROR=ON -DGNIO_CUDA=OFF
  stage tests run_suite "$root/build" -LE gpu
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    stage cuda-compile "$root/scripts/build.sh" "$root/build-cuda" -DGNIO_WERROR=ON -DGNIO_CUDA=ON \
        -DGNIO_BUILD_TESTS=OFF -DGNIO_BUILD_EXAMPLES=OFF --target gnio gnio-perf gnio_nccl
  fi
fi
run_fuzzers() {  # libFuzzer over every network decoder, FUZZ_SECONDS (default 20) each
  if ! command -v clang++ >/dev/null; then
    echo "gnio: clang++ missing, fuzzers skipped (scripts/setup-deps.sh installs it)"
    return 1
  fi
  local dir=$root/build-fuzz targets=(fuzz_wire fuzz_proxy_frame) rc=0
  mkdir -p "$dir"
  if ! CXX=clang++ CC=clang cmake -S "$root" -B "$dir" -G Ninja -DGNIO_CUDA=OFF -DGNIO_FUZZ=ON \
         -DGNIO_BUILD_EXAMPLES=OFF >"$dir/configure.log" 2>&1 ||
     ! cmake --build "$dir" --target "${targets[@]}" >"$dir/build.log" 2>&1; then
    tail -30 "$dir/configure.log" "$dir/build.log" 2>/dev/null
    return 1
  fi
  # The targets fuzz at once (one process each: the machine's two cores).
  local corpus target pids=()
  for target in "${targets[@]}"; do
    corpus=$dir/corpus-$target
    mkdir -p "$corpus"
    local dict=()
    [ -f "$root/tests/fuzz/$target.dict" ] && dict=(-dict="$root/tests/fuzz/$target.dict")
    (cd "$dir" && "./tests/fuzz/$target" "${dict[@]}" -max_total_time="${FUZZ_SECONDS:-20}" \
      -print_final_stats=1 "$corpus" >"$dir/$target.log" 2>&1) &
    pids+=($!)
  done
  local i
  for i in "${!targets[@]}"; do
    target=${targets[$i]}
    if wait "${pids[$i]}"; then
      echo "  $target: $(grep -o 'Done [0-9]* runs' "$dir/$target.log"), no crash"
    else
      tail -40 "$dir/$target.log"
      rc=1
    fi
  done
  return "$rc"
}
# The Python package as a user installs it: `pip install .` into a fresh virtual environment
# (host backend: the cuda-compile stage keeps the CUDA build compiling), then the pytest suite on
# 2 and 3 ranks and the README's snippet, each under gnio-run.
run_python() {
  local venv=$root/build-python/venv snippet
  python3 -m venv "$venv" || return 1
  GNIO_CUDA=OFF "$venv/bin/pip" install -q "$root[test]" || return 1
  snippet=$(mktemp)
  cat >"$snippet" <<'PY'
import numpy as np, gnio
comm = gnio.Comm.from_env()
x = np.full(1024, comm.rank + 1, dtype=np.float32)
comm.all_reduce(x)
assert (x == comm.size * (comm.size + 1) / 2).all()
PY
  local rc=0 n
  for n in 2 3; do
    (cd "$root" && GNIO_BACKEND=host "$venv/bin/gnio-run" -n "$n" --timeout 300 -- \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests) || rc=1
  done
  GNIO_BACKEND=host "$venv/bin/gnio-run" -n 2 --timeout 120 -- "$venv/bin/python" "$snippet" || rc=1
  rm -f "$snippet"
  return "$rc"
}
if [ "$quick" = 0 ]; then
  stage python run_python
  stage fuzz run_fuzzers
  stage tsan-build "$root/scripts/build.sh" "$root/build-tsan" "${sanitizer_flags[@]}" -DGNIO_SANITIZE=thread \
      -DGNIO_WERROR=ON -DGNIO_BUILD_EXAMPLES=OFF
  # libgnio links UCX (the ucx backend), whose memory hooks, installed when the library loads,
  # crash ThreadSanitizer's runtime at process exit: every test process runs with them off.
  UCX_MEM_EVENTS=no TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    stage tsan-tests run_suite "$root/build-tsan" -LE "gpu|nosan"
  stage asan-build "$root/scripts/build.sh" "$root/build-asan" "${sanitizer_flags[@]}" -DGNIO_SANITIZE=address \
      -DGNIO_WERROR=ON -DGNIO_BUILD_EXAMPLES=OFF
  # tests/lsan.supp: leaks of third-party libraries only (libpmix, Open MPI).
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
    LSAN_OPTIONS="suppressions=$root/tests/lsan.supp" \
    stage asan-tests run_suite "$root/build-asan" -LE "gpu|nosan"
fi
if ((${#failed[@]})); then
  echo "gnio tests FAILED: ${failed[*]}"
  exit 1
fi
echo "gnio tests passed (${SECONDS}s)"
