#!/usr/bin/env bash
# Runs one gnio test program as ranks on 2 "nodes" that are network namespaces joined by a veth
# pair, each node with its own IP address and host name (its own UTS namespace), so that node
# membership, the bootstrap and the proxy transport see two real hosts on a real link:
#
#   tests/common/netns_run.sh RANKS_PER_NODE PROGRAM [ARGS...]
#
# Ranks get torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT) and one random GNIO_JOB_TOKEN; the environment is passed on (GNIO_NET, heap sizes).
# Output lines are prefixed with "[rank] ". Exit status: the first failing rank's, 124 when
# NETNS_TIMEOUT (default 300 s) ran out, 77 (ctest's skip) with a "SKIP:" line when this machine
# does not let us create network namespaces (not root, no CAP_SYS_ADMIN, no iproute2).
set -uo pipefail
per=${1:?usage: netns_run.sh RANKS_PER_NODE PROGRAM [ARGS...]}
shift
[ $# -gt 0 ] || { echo "usage: netns_run.sh RANKS_PER_NODE PROGRAM [ARGS...]" >&2; exit 2; }

skip() {
  echo "SKIP: $* - the 2-node namespace test cannot run on this machine"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (running as uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 is not installed (apt-get install iproute2)"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"

tag=gn$$  # interface names are at most 15 characters
ns=("gnio-$tag-0" "gnio-$tag-1")
addr=(10.99.0.1 10.99.0.2)
cleanup() {
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
}
trap cleanup EXIT
err=$(ip netns add "${ns[0]}" 2>&1) || skip "cannot create a network namespace ($err)"
ip netns add "${ns[1]}" || skip "cannot create a second network namespace"
err=$(ip link add "${tag}a" type veth peer name "${tag}b" 2>&1) || skip "cannot create a veth pair ($err)"
ip link set "${tag}a" netns "${ns[0]}" && ip link set "${tag}b" netns "${ns[1]}" || skip "cannot move the veth ends"
for i in 0 1; do
  dev=${tag}a
  [ "$i" = 1 ] && dev=${tag}b
  ip -n "${ns[$i]}" link set lo up &&
    ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "$dev" &&
    ip -n "${ns[$i]}" link set "$dev" up || skip "cannot configure ${ns[$i]}"
done
unshare --uts true 2>/dev/null || skip "cannot create a UTS namespace (own host name per node)"

world=$((2 * per))
port=$((20000 + RANDOM % 20000))
token=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
echo "netns_run: $world ranks, $per per node; node 0 = ${ns[0]} ${addr[0]}, node 1 = ${ns[1]} ${addr[1]}; MASTER_ADDR=${addr[0]} MASTER_PORT=$port"
pids=()
for node in 0 1; do
  for ((l = 0; l < per; ++l)); do
    rank=$((node * per + l))
    # The host name is set inside the rank's own UTS namespace; the program then replaces the shell.
    timeout "${NETNS_TIMEOUT:-300}" ip netns exec "${ns[$node]}" unshare --uts \
      sh -c 'echo "$0" > /proc/sys/kernel/hostname && exec "$@"' "gnio-node$node" \
      env RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$l LOCAL_WORLD_SIZE=$per \
      MASTER_ADDR="${addr[0]}" MASTER_PORT=$port GNIO_JOB_TOKEN="$token" "$@" \
      > >(sed -u "s/^/[$rank] /") 2>&1 &
    pids+=($!)
  done
done
status=0
for p in "${pids[@]}"; do
  wait "$p"
  rc=$?
  [ "$status" = 0 ] && [ "$rc" != 0 ] && status=$rc
done
wait  # the output filters
echo "netns_run: exit status $status"
exit "$status"
