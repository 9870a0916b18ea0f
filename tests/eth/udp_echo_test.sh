#!/usr/bin/env bash
# The UDP echo sample on a veth pair between two network namespaces made here: the peer sends 500
# datagrams of 1..1472 payload bytes, each different, to port 7, and every one must come back
# unchanged from port 7; a datagram to another port must not come back.
#
#   tests/eth/udp_echo_test.sh GNIO_RUN UDP_ECHO
#
# Exit 77 (ctest's skip) with a "SKIP:" line without root, iproute2 or ping.
set -uo pipefail
run=${1:?usage: udp_echo_test.sh GNIO_RUN UDP_ECHO}
echo_bin=${2:?usage: udp_echo_test.sh GNIO_RUN UDP_ECHO}
. "$(dirname "$0")/veth_pair.sh"
peer_knows_mac

ip netns exec "${ns[0]}" "$run" -n 1 --timeout 120 -- "$echo_bin" "${dev[0]}" --seconds 60 \
  --count 500 >"$log/echo.txt" 2>&1 &
responder=$!
wait_port_open "$log/echo.txt"
in_peer python3 - "${addr[0]}" <<'PY' >"$log/client.txt" 2>&1 || fail "datagrams did not come back intact"
import socket, sys
dst = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
s.sendto(b"not for the echo port", (dst, 9))
bad = 0
for i in range(500):
    size = 1 + (i * 37) % 1472
    payload = bytes((i + k) % 251 for k in range(size))
    s.sendto(payload, (dst, 7))
    data, (host, port) = s.recvfrom(2048)
    if data != payload or host != dst or port != 7:
        bad += 1
print("echoed 500, wrong", bad)
sys.exit(1 if bad else 0)
PY
wait "$responder"
rc=$?
responder=
[ "$rc" = 0 ] || fail "the sample exited with $rc"
grep -q "udp_echo: 500 datagrams echoed on port 7; dropped: 1 for other ports" "$log/echo.txt" ||
  fail "the sample's counts are not 500 echoed and 1 for another port"
grep "udp_echo:\|echoed" "$log/echo.txt" "$log/client.txt"
