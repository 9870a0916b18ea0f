#!/usr/bin/env bash
# Third device call of 2026-12-07d (a fresh machine): the whole build of this tree (proxy_post's
# compact inline copy, f6d8a26); this tree's gnio-perf again without the packet-loop change
# (5afad54 reversed: packet-loop-5afad54.patch) to tell which change moved the 8-byte message;
# message latency of both beside e73a22a (.oldpack/old-now.tgz), interleaved; put_signal one
# way 8-256 B and the 8-byte rates through the tcp proxy beside e73a22a; then every GPU test
# (the two-rank ones under MPS).
#   OUT=... CALL_S=575 bash bench/results/2026-12-07d-gpu/call-3.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
unpack_pack now && now=$old
build
# Variant "a" = this tree; "b" = without the packet-loop change (gnio-perf and libgnio rebuilt).
mkdir -p v/a v/b
cp -L build-gpu/src/libgnio.so.0 build-gpu/perf/gnio-perf/gnio-perf v/a/
p=bench/results/2026-12-07d-gpu/packet-loop-5afad54.patch
if git apply -R $p || patch -R -p1 <$p; then
  timeout 200 cmake --build build-gpu --target gnio-perf -j 16 >"$x/variant-b-build.log" 2>&1
  at "variant b built rc=$?"
  cp -L build-gpu/src/libgnio.so.0 build-gpu/perf/gnio-perf/gnio-perf v/b/
  # The tree's source and binaries back (the suite runs build-gpu's gnio-perf too).
  git apply $p || patch -p1 <$p
  cp v/a/gnio-perf build-gpu/perf/gnio-perf/gnio-perf
  cp v/a/libgnio.so.0 "$(readlink -f build-gpu/src/libgnio.so.0)"
fi
msg() {  # NAME DIR
  LD_LIBRARY_PATH=$2${ucx:+:$ucx} GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 \
    $2/gnio-run -n 2 --timeout 18 -- $2/gnio-perf msg --mode lat -b 8 -e 64K -f 8 --reps 5 \
    >"$x/msg-$1.log" 2>&1
  at "msg $1 rc=$?"
}
cp -L "$R" v/a/ && cp -L "$R" v/b/
for i in 1 2 3; do
  for b in old a b; do
    [ "$(left)" -gt 300 ] || break 2
    if [ $b = old ]; then msg old-$i $now; else msg $b-$i $PWD/v/$b; fi
  done
done
net() {  # NAME DIR gnio-perf-args...
  local name=$1 d=$2; shift 2
  LD_LIBRARY_PATH=$d${ucx:+:$ucx} GNIO_BACKEND=cuda GNIO_NET=tcp timeout 40 \
    tests/gpu/concurrent-ranks.sh 2 $d/gnio-run -n 2 --nodes 2 --timeout 35 -- $d/gnio-perf "$@" \
    >"$x/$name.log" 2>&1
  at "$name rc=$?"
}
for rep in 1 2; do
  for b in old a; do
    [ "$(left)" -gt 240 ] || break 2
    d=$PWD/v/a; [ $b = old ] && d=$now
    net lat-$b-$rep $d rma --op put_signal --scope thread --mode lat -b 8 -e 256 -f 2 --reps 3 \
      --json "$x/lat-$b-$rep.json"
    net rate-put-$b-$rep $d msgrate --op put --grid 8 --block 128 -n 200 --reps 3
    net rate-ps-$b-$rep $d msgrate --op put_signal --grid 8 --block 128 -n 200 --reps 3
  done
done
suite $(($(left) - 25))
finish
