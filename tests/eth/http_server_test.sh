#!/usr/bin/env bash
# The HTTP sample on a veth pair between two network namespaces made here: an ordinary client
# (Python's http.client over the peer's Linux TCP stack) fetches the page 20 times, each on a new
# connection, and must get status 200 and the exact page every time; a POST must get 405; the
# sample must have counted 21 connections and acknowledged every close.
#
#   tests/eth/http_server_test.sh GNIO_RUN HTTP_SERVER
#
# Exit 77 (ctest's skip) with a "SKIP:" line without root, iproute2 or ping.
set -uo pipefail
run=${1:?usage: http_server_test.sh GNIO_RUN HTTP_SERVER}
http_bin=${2:?usage: http_server_test.sh GNIO_RUN HTTP_SERVER}
. "$(dirname "$0")/veth_pair.sh"
peer_knows_mac

ip netns exec "${ns[0]}" "$run" -n 1 --timeout 120 -- "$http_bin" "${dev[0]}" --seconds 60 \
  --count 20 >"$log/server.txt" 2>&1 &
responder=$!
wait_port_open "$log/server.txt"
in_peer python3 - "${addr[0]}" <<'PY' >"$log/client.txt" 2>&1 || fail "the client did not get every page"
import http.client, sys
host = sys.argv[1]
expected = b"<html><body><h1>Hello from a gnio kernel</h1></body></html>\n"
c = http.client.HTTPConnection(host, 80, timeout=5)
c.request("POST", "/", body=b"x")
r = c.getresponse()
assert r.status == 405, r.status
r.read()
c.close()
for i in range(20):
    c = http.client.HTTPConnection(host, 80, timeout=5)
    c.request("GET", "/index.html")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200 and body == expected, (i, r.status, body)
    assert r.getheader("Server") == "gnio-kernel"
    c.close()
print("20 pages of", len(expected), "bytes, status 200; POST refused with 405")
PY
wait "$responder"
rc=$?
responder=
[ "$rc" = 0 ] || fail "the sample exited with $rc"
# The POST may come as two segments (headers, body): each is refused, statelessly.
grep -Eq "http_server: 21 connections, 20 pages served, [12] requests refused \(not GET\), 21 closes" \
  "$log/server.txt" || fail "the server's counts are not 21 connections, 20 pages, 21 closes"
grep "http_server:\|pages of" "$log/server.txt" "$log/client.txt"
