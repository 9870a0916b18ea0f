#!/usr/bin/env bash
# The ICMP echo sample on a veth pair between two network namespaces made here: the pinger's
# namespace pings the responder's address first with the Linux stack answering (TTL 64), then
# with examples/eth_icmp_echo answering from a kernel through an AF_XDP port (TTL 42), then with
# the port closed again (the stack answers, so the XDP program is gone). Malformed and foreign
# frames sent before the pings must be counted and dropped, not answered and not fatal; an
# interface that goes down and up under a running port must not crash it or keep it from closing.
#
#   tests/eth/icmp_echo_test.sh GNIO_RUN ICMP_ECHO [PINGS]
#
# Passes when every ping of the middle run is answered with TTL 42 and none with 64, the sample
# counted every bad frame, and the stack answers after the port closed. Prints both runs' round
# trip times. Exit 77 (ctest's skip) with a "SKIP:" line without root, iproute2 or ping.
set -uo pipefail
run=${1:?usage: icmp_echo_test.sh GNIO_RUN ICMP_ECHO [PINGS]}
echo_bin=${2:?usage: icmp_echo_test.sh GNIO_RUN ICMP_ECHO [PINGS]}
pings=${3:-1000}
interval=${ICMP_ECHO_INTERVAL:-0.002}

. "$(dirname "$0")/veth_pair.sh"
pinger() { in_peer "$@"; }
rtt() { sed -n 's#.*= [0-9.]*/\([0-9.]*\)/.*#\1#p' "$1"; }

# 1. The Linux stack answers (this also resolves the responder's MAC, kept static from here: the
#    port takes every packet of the queue, ARP included, and the sample answers pings only).
pinger ping -c "$pings" -i "$interval" -W 1 -q "${addr[0]}" >"$log/ping-stack.txt" 2>&1 ||
  fail "the Linux stack did not answer every ping before the port opened"
mac=$(mac_of 0)
peer_knows_mac

# 2. The kernel answers.
ip netns exec "${ns[0]}" "$run" -n 1 --timeout 120 -- "$echo_bin" "${dev[0]}" --seconds 90 \
  --count "$pings" >"$log/responder.txt" 2>&1 &
responder=$!
wait_port_open "$log/responder.txt"
# Bad input, before any ping: a truncated frame, a foreign EtherType, an IPv4 header with a bad
# checksum, an echo request with a bad ICMP checksum, a UDP datagram.
bad_frames=5
pinger python3 - "${dev[1]}" "$mac" "${addr[1]}" "${addr[0]}" <<'PY' >"$log/bad-frames.txt" 2>&1 ||
import socket, struct, sys
dev, dst_mac, src_ip, dst_ip = sys.argv[1:5]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
dst = bytes.fromhex(dst_mac.replace(":", ""))
src = s.getsockname()[4]
def csum(b):
    if len(b) % 2: b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
def ip(proto, payload, good=True):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, proto, 0,
                    socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    c = csum(h) if good else csum(h) ^ 0x5555
    return h[:10] + struct.pack("!H", c) + h[12:] + payload
eth = dst + src + b"\x08\x00"
icmp = struct.pack("!BBHHH", 8, 0, 0, 7, 1) + b"gnio" * 8
good_icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
bad_icmp = icmp[:2] + struct.pack("!H", csum(icmp) ^ 0x00ff) + icmp[4:]
udp = struct.pack("!HHHH", 4000, 9, 8 + 4, 0) + b"gnio"
frames = [
    eth + b"\x45\x00\x00",                     # truncated inside the IP header
    dst + src + b"\x88\xb5" + b"\0" * 46,      # not IP
    eth + ip(1, good_icmp, good=False),        # IPv4 header checksum wrong
    eth + ip(1, bad_icmp),                     # ICMP checksum wrong
    eth + ip(17, udp),                         # UDP
]
for f in frames:
    s.send(f)
print("sent", len(frames))
PY
  fail "could not send the bad frames"
pinger ping -c "$pings" -i "$interval" -W 2 "${addr[0]}" >"$log/ping-gnio.txt" 2>&1
ping_rc=$?
wait "$responder"
responder_rc=$?
responder=
[ "$responder_rc" = 0 ] || fail "the responder exited with $responder_rc"
[ "$ping_rc" = 0 ] || fail "pings went unanswered with the port open"
answered=$(grep -c "ttl=42" "$log/ping-gnio.txt")
stack=$(grep -c "ttl=64" "$log/ping-gnio.txt")
[ "$answered" = "$pings" ] || fail "$answered of $pings replies carry the kernel's TTL 42"
[ "$stack" = 0 ] || fail "$stack replies came from the Linux stack while the port was open"
grep -q " 0% packet loss" "$log/ping-gnio.txt" || fail "packet loss with the port open"
line=$(grep "replies (ttl" "$log/responder.txt")
count() { echo "$line" | grep -o "[0-9]* $1" | cut -d' ' -f1; }
[ "$(count 'replies')" = "$pings" ] || fail "the responder answered $(count replies), not $pings"
[ "$(count 'not IPv4')" -ge 3 ] || fail "the truncated, foreign and bad-header frames were not counted as not IPv4"
[ "$(count 'not echo')" -ge 1 ] || fail "the UDP datagram was not counted"
[ "$(count 'bad')" -ge 1 ] || fail "the bad ICMP checksum was not counted"

# 3. The port closed: the stack answers again (the XDP program was removed).
pinger ping -c 20 -i "$interval" -W 1 -q "${addr[0]}" >"$log/ping-after.txt" 2>&1 ||
  fail "the Linux stack did not answer after the port closed (XDP program left behind?)"

# 4. The interface goes down under a running port, then comes back: the kernel keeps waiting
#    (bounded), the port closes cleanly when the responder's time is up, the stack answers again.
ip netns exec "${ns[0]}" "$run" -n 1 --timeout 60 -- "$echo_bin" "${dev[0]}" --seconds 3 \
  >"$log/responder-down.txt" 2>&1 &
responder=$!
wait_port_open "$log/responder-down.txt"
pinger ping -c 50 -i "$interval" -W 1 -q "${addr[0]}" >/dev/null 2>&1
ip -n "${ns[0]}" link set "${dev[0]}" down
sleep 0.5
ip -n "${ns[0]}" link set "${dev[0]}" up
wait "$responder"
down_rc=$?
responder=
[ "$down_rc" = 0 ] || fail "the responder exited with $down_rc after its interface went down and up"
grep -q "replies (ttl" "$log/responder-down.txt" || fail "the responder did not report after the interface went down"
sleep 0.5
pinger ping -c 20 -i "$interval" -W 1 -q "${addr[0]}" >"$log/ping-after-down.txt" 2>&1 ||
  fail "the Linux stack did not answer after a port closed on an interface that went down"

echo "$(grep 'icmp_echo: .* queue' "$log/responder.txt")"
echo "$line"
echo "ping x $pings, interval $interval s: Linux stack RTT avg $(rtt "$log/ping-stack.txt") ms;" \
  "gnio kernel (AF_XDP) RTT avg $(rtt "$log/ping-gnio.txt") ms, 0% loss, every reply TTL 42;" \
  "$bad_frames bad frames counted and dropped; stack answers again after close;" \
  "interface down and up under a port: $(grep -o '[0-9]* replies' "$log/responder-down.txt"), clean exit"
