#!/usr/bin/env bash
# The timed-burst sample on a veth pair between two network namespaces made here: the kernel
# sends 40 bursts of 8 UDP datagrams, one burst every 2 ms by its own clock; a receiver in the
# peer namespace must get all 320, each burst's 8 together and in order, and the bursts spread
# over the 78 ms the schedule spans (at least 62 ms: a burst the CPU delayed is followed at once
# by the next ones, so single gaps say little on a loaded machine; none is ever early).
#
#   tests/eth/send_bursts_test.sh GNIO_RUN SEND_BURSTS
#
# Exit 77 (ctest's skip) with a "SKIP:" line without root, iproute2 or ping.
set -uo pipefail
run=${1:?usage: send_bursts_test.sh GNIO_RUN SEND_BURSTS}
bursts_bin=${2:?usage: send_bursts_test.sh GNIO_RUN SEND_BURSTS}
. "$(dirname "$0")/veth_pair.sh"
ip -n "${ns[0]}" neigh replace "${addr[1]}" lladdr "$(mac_of 1)" dev "${dev[0]}" nud permanent

in_peer python3 - <<'PY' >"$log/receiver.txt" 2>&1 &
import socket, statistics, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", 9))
s.settimeout(15.0)
print("listening", flush=True)
got = []
try:
    while len(got) < 320:
        data = s.recv(2048)
        burst, seq = struct.unpack("!II", data[:8])
        got.append((burst, seq, time.monotonic_ns()))
except socket.timeout:
    pass
order_ok = [(b, q) for b, q, _ in got] == [(b, q) for b in range(40) for q in range(8)]
starts = [t for b, q, t in got if q == 0]
gaps = [(b - a) / 1e6 for a, b in zip(starts, starts[1:])]
median = statistics.median(gaps) if gaps else 0
span = (starts[-1] - starts[0]) / 1e6 if starts else 0
print("received %d of 320, in order %s; bursts spread over %.1f ms (39 x 2 ms = 78 ms); "
      "median burst gap %.3f ms (min %.3f, max %.3f)" %
      (len(got), order_ok, span, median, min(gaps or [0]), max(gaps or [0])))
# Bursts never leave before their time, so they spread over at least 78 ms less the first
# burst's lateness (a loaded CPU delays a burst and the next ones catch up): 62 ms is the bar.
sys.exit(0 if len(got) == 320 and order_ok and span >= 62.0 else 1)
PY
receiver=$!
for _ in $(seq 100); do grep -q listening "$log/receiver.txt" && break; sleep 0.05; done
ip netns exec "${ns[0]}" "$run" -n 1 --timeout 60 -- "$bursts_bin" "${dev[0]}" \
  --dst-mac "$(mac_of 1)" --src "${addr[0]}" --dst "${addr[1]}" --bursts 40 --burst 8 \
  --interval-us 2000 >"$log/sender.txt" 2>&1 || fail "the sample failed"
wait "$receiver" || fail "the receiver did not get every burst, in order, spread over the schedule"
grep "send_bursts:\|received" "$log/sender.txt" "$log/receiver.txt"
