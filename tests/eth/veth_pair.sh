# Sourced by the packet-I/O tests: two network namespaces joined by a veth pair, made for one test
# and removed when it exits. After sourcing: ns[0] / dev[0] / addr[0] (where the gnio program
# runs), ns[1] / dev[1] / addr[1] (the peer: pinger, sender); `log` (a folder for outputs),
# `responder` (a background pid to kill on exit), `in_peer CMD...`, `fail MESSAGE` (prints the
# logs, exit 1), `peer_knows_mac` (a static neighbour entry on the peer: the port takes every
# packet of its queue, ARP included). Skips (exit 77, "SKIP:") without root, iproute2 or ping.
skip() {
  echo "SKIP: $* - the packet-I/O test cannot run on this machine"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces and AF_XDP need root (uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 is not installed"
command -v ping >/dev/null || skip "ping is not installed (iputils-ping)"

tag=ge$$
ns=("gnio-$tag-r" "gnio-$tag-p")
dev=("${tag}r" "${tag}p")
addr=(10.98.0.1 10.98.0.2)
log=$(mktemp -d "${TMPDIR:-/tmp}/gnio-eth.XXXXXX")
responder=
cleanup() {
  [ -n "$responder" ] && kill "$responder" 2>/dev/null
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$log"
}
trap cleanup EXIT
err=$(ip netns add "${ns[0]}" 2>&1) || skip "cannot create a network namespace ($err)"
ip netns add "${ns[1]}" || skip "cannot create a second network namespace"
err=$(ip link add "${dev[0]}" netns "${ns[0]}" type veth peer name "${dev[1]}" netns "${ns[1]}" 2>&1) ||
  skip "cannot create a veth pair ($err)"
for i in 0 1; do
  ip -n "${ns[$i]}" link set lo up
  ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${dev[$i]}"
  ip -n "${ns[$i]}" link set "${dev[$i]}" up
done
fail() {
  echo "FAIL: $*"
  for f in "$log"/*; do echo "--- $(basename "$f")"; tail -20 "$f"; done
  exit 1
}
in_peer() { ip netns exec "${ns[1]}" "$@"; }
mac_of() { ip -n "${ns[$1]}" -o link show "${dev[$1]}" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2; }
peer_knows_mac() { ip -n "${ns[1]}" neigh replace "${addr[0]}" lladdr "$(mac_of 0)" dev "${dev[1]}" nud permanent; }
# Waits (10 s) until the program writing `$1` printed "<name>: <dev[0]> queue" (its port is open).
wait_port_open() {
  for _ in $(seq 200); do
    grep -q ": ${dev[0]} queue" "$1" && return 0
    kill -0 "$responder" 2>/dev/null || fail "the program ended before its port opened"
    sleep 0.05
  done
  fail "the port did not open within 10 s"
}
