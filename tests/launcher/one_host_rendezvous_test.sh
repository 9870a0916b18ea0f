#!/usr/bin/env bash
# Ranks started the way mpirun, srun and PMI launchers start them on one host, without
# MASTER_ADDR or any GNIO_BOOTSTRAP_* variable: they must meet on their own (the rendezvous file
# of src/bootstrap/local_rendezvous.hpp), ignore a file a dead job left, say clearly why they
# cannot meet when nothing names the job, and time out naming the file when rank 0 never comes.
#
#   one_host_rendezvous_test.sh GNIO_INFO GNIO_PERF
set -uo pipefail
info=${1:?usage: one_host_rendezvous_test.sh GNIO_INFO GNIO_PERF}
perf=${2:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GNIO_BACKEND=host GNIO_RENDEZVOUS_DIR=$tmp
unset MASTER_ADDR MASTER_PORT GNIO_BOOTSTRAP_ADDR GNIO_BOOTSTRAP_PORT GNIO_JOB_TOKEN RANK WORLD_SIZE
source "$(dirname "$0")/checks.sh"

# Open MPI's variables for rank $1 of $2 (all on this host), job $3.
ompi() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=$2 OMPI_COMM_WORLD_LOCAL_RANK=$1 OMPI_COMM_WORLD_LOCAL_SIZE=$2 OMPI_MCA_ess_base_jobid=$3"; }
slurm() { echo "SLURM_PROCID=$1 SLURM_NTASKS=$2 SLURM_LOCALID=$1 SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=$2 SLURM_JOB_ID=$3 SLURM_STEP_ID=0"; }

# Runs N ranks of a command with the launcher's variables; rank r's output in $tmp/out.r.
launch() {  # launch ompi|slurm N JOB COMMAND...
  local kind=$1 n=$2 job=$3
  shift 3
  local pids=() rc=0
  for r in $(seq 0 $((n - 1))); do
    env $($kind "$r" "$n" "$job") "$@" >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}
ranks_say() {  # every rank's gnio-info names its rank, the size and the launcher
  local n=$1 launcher=$2
  for r in $(seq 0 $((n - 1))); do
    python3 - "$tmp/out.$r" "$r" "$n" "$launcher" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))["rank"]
assert (d["rank"], d["size"], d["launcher"]) == (int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]), d
PY
  done
}
no_file_left() { ! ls "$tmp"/gnio-rendezvous-* >/dev/null 2>&1; }

launch ompi 3 4242 timeout 60 "$info" --json
check "Open MPI, 3 ranks, no address: gnio-info meets" ranks_say 3 openmpi
check "the rendezvous file is removed" no_file_left

launch slurm 2 777 timeout 60 "$info" --json
check "Slurm, 2 ranks, no address: gnio-info meets" ranks_say 2 slurm

launch ompi 3 4243 timeout 120 "$perf" coll --quick
check "Open MPI, 3 ranks: every collective of gnio-perf --quick checked" \
  grep -q "allreduce" "$tmp/out.0"

# A file left by a dead job of the same token (GNIO_JOB_TOKEN fixes the name): ranks 1 and 2
# start first, find it, see its writer is gone and wait for the real one.
/bin/true &  # a process id that no longer runs
dead=$!
wait $dead
echo "45678 $dead" >"$tmp/gnio-rendezvous-0000000000000abc"
pids=()
for r in 1 2; do
  env $(ompi $r 3 "") GNIO_JOB_TOKEN=abc timeout 60 "$info" --json >"$tmp/out.$r" 2>"$tmp/err.$r" &
  pids+=($!)
done
sleep 1
env $(ompi 0 3 "") GNIO_JOB_TOKEN=abc timeout 60 "$info" --json >"$tmp/out.0" 2>"$tmp/err.0"
for p in "${pids[@]}"; do wait "$p"; done
check "a dead job's rendezvous file is ignored" ranks_say 3 openmpi

# Nothing names the job: a clear error, not a hang.
env $(ompi 1 2 "") GNIO_BOOTSTRAP_TIMEOUT=5 timeout 30 "$info" --json >"$tmp/out.x" 2>"$tmp/err.x"
check "no job id: refused with a reason" grep -q "no job id to meet on this host by" "$tmp/out.x" "$tmp/err.x"

# Rank 0 never starts: the others give up within GNIO_BOOTSTRAP_TIMEOUT, naming the file.
start=$SECONDS
env $(ompi 1 2 999) GNIO_BOOTSTRAP_TIMEOUT=2 timeout 30 "$info" --json >"$tmp/out.y" 2>"$tmp/err.y"
check "rank 0 missing: Timeout naming the rendezvous file" grep -q "gnio-rendezvous-" "$tmp/out.y" "$tmp/err.y"
check "rank 0 missing: within the bootstrap timeout" test $((SECONDS - start)) -lt 15

# A real mpirun meets through its PMIx server instead: tests/launcher/mpirun_test.sh.

if [ "$failures" -gt 0 ]; then
  for f in "$tmp"/err.*; do echo "== $f"; tail -5 "$f"; done
  exit 1
fi
echo "one-host rendezvous: all checks passed"
