#!/usr/bin/env bash
# The UDP flow-counter sample on a veth pair between two network namespaces made here: the peer
# sends three UDP flows of known sizes (1000, 700 and 1300 datagrams from ports 4001-4003, paced)
# plus frames that are not UDP; the sample's kernel counts them per flow and reports through a
# semaphore; the CPU's totals must match what was sent, datagram for datagram and byte for byte.
#
#   tests/eth/udp_flows_test.sh GNIO_RUN UDP_FLOWS [SAMPLE ARGS...]   (e.g. --packet: AF_PACKET)
#
# UDP_FLOWS_OVERFLOW=1 (with --hold-ms): the datagrams go out unpaced while the kernel holds the
# queue, and the check is that reported + dropped covers all 3000 (ring overflow is counted, not
# a crash or a hang).
#
# Exit 77 (ctest's skip) with a "SKIP:" line without root, iproute2 or ping.
set -uo pipefail
run=${1:?usage: udp_flows_test.sh GNIO_RUN UDP_FLOWS}
flows_bin=${2:?usage: udp_flows_test.sh GNIO_RUN UDP_FLOWS}
shift 2
. "$(dirname "$0")/veth_pair.sh"
peer_knows_mac

ip netns exec "${ns[0]}" "$run" -n 1 --timeout 120 -- "$flows_bin" "${dev[0]}" --seconds 60 \
  --count "${UDP_FLOWS_COUNT:-3000}" "$@" >"$log/flows.txt" 2>&1 &
responder=$!
wait_port_open "$log/flows.txt"
in_peer python3 - "${addr[0]}" "${UDP_FLOWS_OVERFLOW:-0}" <<'PY' >"$log/sender.txt" 2>&1 || fail "the sender failed"
import socket, sys, time
dst, overflow = sys.argv[1], sys.argv[2] == "1"
plan = [(4001, 1000, 10), (4002, 700, 333), (4003, 1300, 64)]  # port, datagrams, payload bytes
socks = {}
for port, _, _ in plan:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", port))
    socks[port] = s
sent = {p: 0 for p, _, _ in plan}
start = time.monotonic()
while any(sent[p] < n for p, n, _ in plan):
    for p, n, size in plan:
        for _ in range(10):
            if sent[p] < n:
                socks[p].sendto(b"g" * size, (dst, 9))
                sent[p] += 1
    if not overflow:
        time.sleep(0.0005)  # a burst of up to 30, then a pause: well within the rings
print("sent", sent, "in %.3f s" % (time.monotonic() - start))
PY
wait "$responder"
rc=$?
responder=
[ "$rc" = 0 ] || fail "the sample exited with $rc"
if [ "${UDP_FLOWS_OVERFLOW:-0}" = 1 ]; then
  # The kernel held the queue (3 s) while all 3000 came: the 2048-frame rings overflowed. What it
  # reported plus what the port counted as dropped must cover every datagram, and it must have
  # reported at least a ring's worth.
  got=$(sed -n 's/.*udp_flows: \([0-9]*\) datagrams in.*/\1/p' "$log/flows.txt")
  dropped=$(sed -n 's/.*frames received, \([0-9]*\) dropped.*/\1/p' "$log/flows.txt")
  [ -n "$got" ] && [ -n "$dropped" ] || fail "no totals printed"
  took=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$log/sender.txt")
  awk -v t="$took" 'BEGIN { exit !(t != "" && t < 2.5) }' ||
    fail "the sender took ${took:-?} s, not within the kernel's 3 s hold: the test proves nothing"
  [ "$dropped" -gt 0 ] || fail "no drops counted although the rings overflowed"
  [ "$got" -ge 1024 ] || fail "only $got datagrams reported"
  [ $((got + dropped)) -ge 3000 ] || fail "$got reported + $dropped dropped < 3000 sent"
  grep "udp_flows:" "$log/flows.txt"
  exit 0
fi
expect() {  # port datagrams bytes
  grep -q "flow ${addr[1]}:$1 -> port 9: $2 datagrams, $3 payload bytes" "$log/flows.txt" ||
    fail "flow from port $1: expected $2 datagrams, $3 bytes"
}
expect 4001 1000 10000
expect 4002 700 233100
expect 4003 1300 83200
grep -q "udp_flows: 3000 datagrams in 3 flows" "$log/flows.txt" ||
  fail "other flows or datagrams were counted"
grep "udp_flows:" "$log/flows.txt"
