#!/usr/bin/env bash
# Second device call of 2026-12-07d, on the warm machine (build-gpu of call-1 kept): the proxy
# through tcp, 2 ranks as 2 nodes under MPS, this tree beside e73a22a (.oldpack/old-now.tgz, the
# device code before the wide-store posts), interleaved: put_signal one way 8 B-256 B (inline
# data) with the proxy's per-frame times, the 8-byte put and put_signal rates; then this tree with
# a kernel launch per received batch against the delivery agent (GNIO_PROXY_AGENT=1); the raw TCP
# floor first.
#   OUT=... CALL_S=560 bash bench/results/2026-12-07d-gpu/call-2.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
unpack_pack now && now=$old
timeout 60 build-gpu/perf/probes/gnio-tcp-floor --json "$x/floor.json" >"$x/floor.log" 2>&1
at "floor rc=$?"
run() {  # NAME BUILD AGENT gnio-perf-args...
  local name=$1 b=$2 agent=$3 run=$R perf=$P lib=${ucx:-}; shift 3
  [ "$b" = old ] && run=$now/gnio-run perf=$now/gnio-perf lib=$now${ucx:+:$ucx}
  LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_PROXY_STATS=1 GNIO_PROXY_AGENT=$agent \
    timeout 40 tests/gpu/concurrent-ranks.sh 2 $run -n 2 --nodes 2 --timeout 35 -- $perf "$@" \
    >"$x/$name.log" 2>&1
  at "$name rc=$?"
}
for rep in 1 2; do
  for b in old new; do
    [ "$(left)" -gt 150 ] || break 2
    run lat-$b-$rep $b 0 rma --op put_signal --scope thread --mode lat -b 8 -e 256 -f 2 --reps 3 \
      --json "$x/lat-$b-$rep.json"
    run rate-put-$b-$rep $b 0 msgrate --op put --grid 8 --block 128 -n 200 --reps 3 \
      --json "$x/rate-put-$b-$rep.json"
    run rate-ps-$b-$rep $b 0 msgrate --op put_signal --grid 8 --block 128 -n 200 --reps 3 \
      --json "$x/rate-ps-$b-$rep.json"
  done
done
for agent in 1 0 1; do
  [ "$(left)" -gt 30 ] || break
  run lat-agent$agent new $agent rma --op put_signal --scope thread --mode lat -b 8 -e 8 --reps 3
  run rate-agent$agent new $agent msgrate --op put_signal --grid 8 --block 128 -n 200 --reps 3
done
finish
