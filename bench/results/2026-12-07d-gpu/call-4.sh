#!/usr/bin/env bash
# Last device call of 2026-12-07d, on the tree the session ends its device code with (the packet
# loop change reverted, proxy_post's compact inline copy): the whole build; message latency
# beside e73a22a (.oldpack/old-now.tgz); through the tcp proxy (2 ranks as 2 nodes, MPS)
# put_signal one way 8-256 B and the 8-byte rates beside e73a22a, then a kernel launch per
# received batch against the delivery agent; the RMA latency table beside e8c5dec
# (.oldpack/old-e8c5dec.tgz); every GPU test (the two-rank ones under MPS); the issue-22 table
# beside raw TCP (session-run.sh net-one-gpu) with what time is left.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07d-gpu/call-4.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
unpack_pack e8c5dec && e8=$old
unpack_pack now && now=$old
build
mkdir -p v/new && cp -L build-gpu/src/libgnio.so.0 "$P" "$R" v/new/
new=$PWD/v/new
msg() {  # NAME DIR
  LD_LIBRARY_PATH=$2${ucx:+:$ucx} GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 \
    $2/gnio-run -n 2 --timeout 18 -- $2/gnio-perf msg --mode lat -b 8 -e 64K -f 8 --reps 5 \
    >"$x/msg-$1.log" 2>&1
  at "msg $1 rc=$?"
}
net() {  # NAME DIR AGENT gnio-perf-args...
  local name=$1 d=$2 agent=$3; shift 3
  LD_LIBRARY_PATH=$d${ucx:+:$ucx} GNIO_BACKEND=cuda GNIO_NET=tcp GNIO_PROXY_STATS=1 \
    GNIO_PROXY_AGENT=$agent timeout 40 tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 \
    --nodes 2 --timeout 35 -- $d/gnio-perf "$@" >"$x/$name.log" 2>&1
  at "$name rc=$?"
}
for i in 1 2 3; do
  msg old-$i $now
  msg new-$i $new
done
for i in 1 2; do
  for b in old new; do
    d=$new; [ $b = old ] && d=$now
    net lat-$b-$i $d 0 rma --op put_signal --scope thread --mode lat -b 8 -e 256 -f 2 --reps 3
    net rate-put-$b-$i $d 0 msgrate --op put --grid 8 --block 128 -n 200 --reps 3
    net rate-ps-$b-$i $d 0 msgrate --op put_signal --grid 8 --block 128 -n 200 --reps 3
  done
done
for i in 1 2 3; do
  for agent in 0 1; do
    net agent$agent-lat-$i $new $agent rma --op put_signal --scope thread --mode lat -b 8 -e 8 --reps 3
    net agent$agent-rate-$i $new $agent msgrate --op put_signal --grid 8 --block 128 -n 200 --reps 3
  done
done
for i in 1 2; do
  for b in old new; do
    if [ $b = old ]; then perf=$e8/gnio-perf lib=$e8${ucx:+:$ucx}
    else perf=$P lib=${ucx:-}; fi
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
      --timeout 18 -- $perf rma --mode lat -b 8 -e 64K -f 8 --json "$x/rma-lat-$b-$i.json" \
      >"$x/rma-lat-$b-$i.log" 2>&1
    at "rma lat $b $i rc=$?"
  done
done
suite 260
l=$(left)
[ "$l" -gt 60 ] && OUT=$OUT/c NET_PARTS="lat rate put" timeout $((l - 10)) \
  tests/gpu/session-run.sh net-one-gpu
at "net-one-gpu done"
finish
