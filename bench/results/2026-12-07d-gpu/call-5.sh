#!/usr/bin/env bash
# Last call of 2026-12-07d (what device time was left): the whole build of this tree (the proxy's
# idle policy written once for tcp and ucx: host code), the GPU tests that go through the proxy
# (2 ranks as 2 nodes; the concurrent ones under MPS), then compute-sanitizer memcheck on the
# functional suites (session-run.sh sanitize) as time allows.
#   OUT=... CALL_S=300 bash bench/results/2026-12-07d-gpu/call-5.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
NET_TESTS='(2nodes|rma_net_test|rma_persistent_test).*_gpu$'
OUT=$OUT/b SUITE_FILTER="$NET_TESTS" SUITE_MPS=1 timeout $(($(left) - 60)) \
  tests/gpu/session-run.sh suite
at "proxy tests done"
l=$(left)
[ "$l" -gt 40 ] && OUT=$OUT/c timeout $((l - 8)) tests/gpu/session-run.sh sanitize
at "sanitize done"
finish
