#!/usr/bin/env bash
# Communicator creation under each launcher on one host (host backend, 4 ranks): gnio-scale-probe's
# Comm::from_env (launcher rendezvous + bootstrap + creation; slowest rank and mean) and
# Comm::from_unique_id (creation alone), ROUNDS rounds interleaved. srun needs a running Slurm
# (SLURM_CONF; tests/launcher/slurm_test.sh shows how to start a private one); without it the srun
# rows are skipped.
#
#   BUILD=build ROUNDS=5 bench/results/2026-12-05-cpu-launchers/run.sh
set -uo pipefail
build=${BUILD:?the build}
probe=$build/bench/scale/gnio-scale-probe
export GNIO_BACKEND=host
launchers=("gnio-run:$build/tools/gnio-run/gnio-run -n 4 --"
  "mpirun:mpirun --allow-run-as-root --oversubscribe -np 4 -x GNIO_BACKEND")
if [ -n "${SLURM_CONF:-}" ] && sinfo >/dev/null 2>&1; then
  launchers+=("srun-pmix:srun --overcommit --mpi=pmix -n 4" "srun-none:srun --overcommit --mpi=none -n 4")
fi
for i in $(seq "${ROUNDS:-5}"); do
  for l in "${launchers[@]}"; do
    name=${l%%:*}
    out=$(timeout 120 ${l#*:} "$probe" --reps 5 2>&1)
    env_max=$(sed -n 's/.*from_env (ms, launcher included) *\([0-9.]*\) *\([0-9.]*\).*/\1 \2/p' <<<"$out")
    uid=$(sed -n 's/.*from_unique_id (ms, slowest rank) *\([0-9.]*\).*/\1/p' <<<"$out")
    echo "$name $env_max $uid"
  done
done | python3 -c '
import sys, statistics, collections
rows = collections.OrderedDict()
for line in sys.stdin:
    f = line.split()
    if len(f) == 4: rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
print("| launcher | Comm::from_env ms, slowest rank | mean rank | Comm::from_unique_id ms | rounds |")
print("|---|---|---|---|---|")
for k, v in rows.items():
    m = [statistics.median(c) for c in zip(*v)]
    print("| %s | %.2f | %.2f | %.2f | %d |" % (k, m[0], m[1], m[2], len(v)))'
