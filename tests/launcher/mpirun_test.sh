#!/usr/bin/env bash
# Plain mpirun, as HPC users launch, with no MASTER_* or GNIO_BOOTSTRAP_* variable: the ranks
# meet through mpirun's PMIx server (src/bootstrap/pmix_rendezvous.hpp). Checks: gnio-info and
# every collective of gnio-perf --quick on 3 ranks; gnio::comm_from_mpi in an MPI program
# (MPI_COMM_WORLD and a split); a stray process with a wrong token that claims rank 1 while the
# job is meeting is refused, and the job completes.
#
#   mpirun_test.sh GNIO_INFO GNIO_PERF MPI_COMM_TEST
# Exit 77 (ctest's skip) without mpirun on PATH.
set -uo pipefail
info=${1:?usage: mpirun_test.sh GNIO_INFO GNIO_PERF MPI_COMM_TEST}
perf=${2:?}
mpi_test=${3:?}
command -v mpirun >/dev/null || { echo "SKIP: no mpirun on PATH"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GNIO_BACKEND=host GNIO_RENDEZVOUS_DIR=$tmp
unset MASTER_ADDR MASTER_PORT GNIO_BOOTSTRAP_ADDR GNIO_BOOTSTRAP_PORT GNIO_JOB_TOKEN RANK WORLD_SIZE
mpirun=(mpirun --oversubscribe --mca btl_vader_single_copy_mechanism none -x GNIO_BACKEND
  -x GNIO_RENDEZVOUS_DIR -x GNIO_DEBUG)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
source "$(dirname "$0")/checks.sh"
no_file_left() { ! ls "$tmp"/gnio-rendezvous-* >/dev/null 2>&1; }

GNIO_DEBUG=INFO timeout 120 "${mpirun[@]}" -np 3 "$info" --json >"$tmp/info.out" 2>"$tmp/info.err"
check "mpirun -np 3 gnio-info --json: 3 ranks say openmpi" count_is "$tmp/info.out" '"launcher":"openmpi"' 3
check "they met through PMIx" grep -q "published through PMIx" "$tmp/info.err"
check "no rendezvous file was used" no_file_left

GNIO_DEBUG=WARN timeout 180 "${mpirun[@]}" -np 3 "$perf" coll --quick >"$tmp/perf.out" 2>"$tmp/perf.err"
check "mpirun -np 3 gnio-perf coll --quick: every collective checked" \
  grep -q "allreduce" "$tmp/perf.out"

GNIO_DEBUG=WARN timeout 180 "${mpirun[@]}" -np 3 "$mpi_test" >"$tmp/mpi.out" 2>"$tmp/mpi.err"
check "comm_from_mpi on MPI_COMM_WORLD and a split, every element checked" \
  grep -q "mpi_comm_test: ok" "$tmp/mpi.out"

# The stray: ranks 1 and 2 start 2 s late; while rank 0's root waits for them, a process with a
# wrong token claims rank 1 at the root's address (from rank 0's log). It must be refused and the
# job must still complete with the real ranks.
cat >"$tmp/late.sh" <<SH
#!/usr/bin/env bash
[ "\$OMPI_COMM_WORLD_RANK" = 0 ] || sleep 2
exec "$info" --json 2>"$tmp/late.err.\$OMPI_COMM_WORLD_RANK"
SH
chmod +x "$tmp/late.sh"
GNIO_DEBUG=INFO timeout 120 "${mpirun[@]}" -np 3 "$tmp/late.sh" >"$tmp/late.out" 2>&1 &
job=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*root at 127\.0\.0\.1:\([0-9]*\), published through PMIx.*/\1/p' \
    "$tmp/late.err.0" 2>/dev/null | head -1)
  [ -n "$port" ] && break
  sleep 0.05
done
check "rank 0 logged its root address" test -n "$port"
if [ -n "$port" ]; then
  RANK=1 WORLD_SIZE=3 LOCAL_RANK=1 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) \
    GNIO_BOOTSTRAP_PORT=$port GNIO_JOB_TOKEN=bad GNIO_BOOTSTRAP_TIMEOUT=3 GNIO_DEBUG=WARN \
    timeout 30 "$info" --json >"$tmp/stray.out" 2>"$tmp/stray.err"
  stray_rc=$?
  check "the stray with a wrong token is refused" test "$stray_rc" != 0
fi
wait "$job"
job_rc=$?
check "the job completes despite the stray" test "$job_rc" = 0
check "with its own 3 ranks" count_is "$tmp/late.out" '"launcher":"openmpi"' 3

finish mpirun "$tmp"/*.err* "$tmp"/late.out
