#!/usr/bin/env bash
# The survivors' teardown after a rank is killed mid-stream over ucx (liveness_test_ucx's
# KillDuringStreamOfPutSignalsAcrossNodes), N times with 4 busy loops loading the 2 cores, runs of
# this build alternated with runs whose ranks load an older libgnio (OLD_LIB: a folder holding
# its libgnio.so.0; LD_LIBRARY_PATH wins over the binaries' RUNPATH). Prints the failures of each.
#
#   BUILD=/work/build-host OLD_LIB=/tmp/baselib N=200 bench/results/2026-12-07e-cpu/ucx-teardown-stress.sh
set -uo pipefail
build=${BUILD:?the build directory}
old=${OLD_LIB:?folder with the older libgnio.so.0}
n=${N:-200}
logs=$(mktemp -d)
cd "$build"
for j in 1 2 3 4; do timeout 3000 sh -c 'while :; do :; done' & done
trap 'kill $(jobs -p) 2>/dev/null' EXIT
test_=(./tests/liveness/liveness_test --gtest_filter=PeerFailure.KillDuringStreamOfPutSignalsAcrossNodes)
fails_old=0 fails_new=0
for i in $(seq "$n"); do
  LD_LIBRARY_PATH=$old GNIO_NET=ucx timeout 120 "${test_[@]}" >"$logs/old_$i.log" 2>&1 ||
    { fails_old=$((fails_old + 1)); echo "old fails, run $i"; }
  GNIO_NET=ucx timeout 120 "${test_[@]}" >"$logs/new_$i.log" 2>&1 ||
    { fails_new=$((fails_new + 1)); echo "new fails, run $i"; }
done
echo "failures of $n: old $fails_old, new $fails_new (logs in $logs; UCX's abort: grep refcounts.create)"
