#!/usr/bin/env bash
# srun, as Slurm users launch, on a private one-host Slurm cluster this script starts and stops:
# munged, slurmctld and slurmd with their own configuration, ports, state and munge key in a
# temporary directory (nothing of the machine's own Slurm, if any, is read or touched). No
# MASTER_* or GNIO_BOOTSTRAP_* variable is set. Checks:
#   * srun --mpi=pmix -n 3 gnio-info --json: 3 ranks, launcher slurm, met through Slurm's PMIx;
#   * srun -n 3 (no PMI plugin) gnio-info --json: met through the one-host rendezvous file;
#   * srun --mpi=pmix -n 3 gnio-perf coll --quick: every collective, every element checked;
#   * the same over 2 simulated nodes (GNIO_NODE_ID per task), so the network proxy is in play.
#
#   slurm_test.sh GNIO_INFO GNIO_PERF
# Exit 77 (ctest's skip) without Slurm's and munge's programs (scripts/setup-deps.sh installs
# them) or when not root (slurmd starts tasks as their owner).
set -uo pipefail
info=${1:?usage: slurm_test.sh GNIO_INFO GNIO_PERF}
perf=${2:?}
for p in slurmctld slurmd srun sinfo munged; do
  command -v "$p" >/dev/null || { echo "SKIP: no $p on PATH"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }
tmp=$(mktemp -d)
mkdir -p "$tmp"/{state,spool,log,munge,rendezvous}
chmod 700 "$tmp/munge"
stop_cluster() {
  for d in slurmd slurmctld; do
    [ -f "$tmp/$d.pid" ] && kill "$(cat "$tmp/$d.pid")" 2>/dev/null
  done
  [ -f "$tmp/munge/pid" ] && kill "$(cat "$tmp/munge/pid")" 2>/dev/null
  sleep 0.5
  rm -rf "$tmp"
}
trap stop_cluster EXIT
read -r ctl_port node_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
cat >"$tmp/slurm.conf" <<CONF
ClusterName=gnio-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$node_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=gnio-test NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=500 State=UNKNOWN
PartitionName=test Nodes=gnio-test Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:64
CONF
export SLURM_CONF=$tmp/slurm.conf
head -c 1024 /dev/urandom >"$tmp/munge/key"
chmod 600 "$tmp/munge/key"
munged --force --socket="$tmp/munge/sock" --key-file="$tmp/munge/key" --pid-file="$tmp/munge/pid" \
  --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/seed" >"$tmp/log/munged.out" 2>&1
slurmctld -c -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1
slurmd -N gnio-test -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1
for _ in $(seq 150); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
  sleep 0.2
done
if [ "$(sinfo -h -o %T 2>/dev/null)" != idle ]; then
  echo "FAILED: the private Slurm did not come up (node state: $(sinfo -h -o %T 2>&1))"
  tail -5 "$tmp"/log/*.log
  exit 1
fi
echo "ok: a private Slurm on ports $ctl_port/$node_port"

export GNIO_BACKEND=host GNIO_RENDEZVOUS_DIR=$tmp/rendezvous
unset MASTER_ADDR MASTER_PORT GNIO_BOOTSTRAP_ADDR GNIO_BOOTSTRAP_PORT GNIO_JOB_TOKEN RANK WORLD_SIZE
srun=(timeout 180 srun --overcommit --kill-on-bad-exit=1)
source "$(dirname "$0")/checks.sh"

GNIO_DEBUG=INFO "${srun[@]}" --mpi=pmix -n 3 "$info" --json >"$tmp/pmix.out" 2>"$tmp/pmix.err"
check "srun --mpi=pmix -n 3 gnio-info --json: 3 ranks say slurm" \
  count_is "$tmp/pmix.out" '"launcher":"slurm"' 3
check "they met through Slurm's PMIx" grep -q "published through PMIx" "$tmp/pmix.err"

GNIO_DEBUG=INFO "${srun[@]}" --mpi=none -n 3 "$info" --json >"$tmp/file.out" 2>"$tmp/file.err"
check "srun -n 3 gnio-info --json (no PMI): 3 ranks say slurm" \
  count_is "$tmp/file.out" '"launcher":"slurm"' 3
check "they met through the one-host rendezvous file" grep -q "published in" "$tmp/file.err"

GNIO_DEBUG=WARN "${srun[@]}" --mpi=pmix -n 3 "$perf" coll --quick >"$tmp/coll.out" 2>"$tmp/coll.err"
check "srun --mpi=pmix -n 3 gnio-perf coll --quick: every collective checked" \
  grep -q "all data checks passed" "$tmp/coll.out"

# Two simulated nodes: tasks 0-1 on one, 2-3 on the other, so collectives cross the proxy.
cat >"$tmp/two_nodes.sh" <<SH
#!/usr/bin/env bash
GNIO_NODE_ID=slurm-node\$((SLURM_PROCID / 2)) GNIO_NET=tcp exec "\$@"
SH
chmod +x "$tmp/two_nodes.sh"
GNIO_DEBUG=WARN "${srun[@]}" --mpi=pmix -n 4 "$tmp/two_nodes.sh" "$info" --json \
  >"$tmp/nodes-info.out" 2>"$tmp/nodes-info.err"
check "srun --mpi=pmix -n 4 with 2 node ids: 4 ranks on 2 nodes" \
  count_is "$tmp/nodes-info.out" '"nodes":2' 4
GNIO_DEBUG=WARN "${srun[@]}" --mpi=pmix -n 4 "$tmp/two_nodes.sh" "$perf" coll --quick \
  >"$tmp/nodes.out" 2>"$tmp/nodes.err"
check "srun --mpi=pmix -n 4 over 2 simulated nodes: every collective checked" \
  grep -q "all data checks passed" "$tmp/nodes.out"

finish srun "$tmp"/*.err "$tmp"/*.out "$tmp"/log/*.log
