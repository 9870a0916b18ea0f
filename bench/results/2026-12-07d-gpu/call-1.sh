#!/usr/bin/env bash
# First device call of 2026-12-07d: the whole build of this tree (wide-store proxy posts, the
# issue-28 duplicate removals), every GPU test (the two-rank ones under MPS), the RMA latency
# table beside e8c5dec (.oldpack/old-e8c5dec.tgz) and message latency beside e73a22a
# (.oldpack/old-now.tgz: the device code this session started from), builds interleaved.
#   OUT=... CALL_S=580 bash bench/results/2026-12-07d-gpu/call-1.sh
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
# Can the CPU write into this GPU's memory (a GDRCopy-style BAR1 mapping)? What the machine has.
{ ls -l /dev/gdrdrv; lsmod | grep -iE "gdr|nvidia"; nvidia-smi -q | grep -iA3 "bar1"; } >"$x/bar1.txt" 2>&1
build
unpack_pack e8c5dec && e8=$old
unpack_pack now && now=$old
suite $(($(left) - 130))
for i in 1 2; do
  for b in old new; do
    [ "$(left)" -gt 12 ] || break 2
    if [ $b = old ]; then perf=$e8/gnio-perf lib=$e8${ucx:+:$ucx}
    else perf=$P lib=${ucx:-}; fi
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 $R -n 2 \
      --timeout 18 -- $perf rma --mode lat -b 8 -e 64K -f 8 --json "$x/rma-lat-$b-$i.json" \
      >"$x/lat-$b-$i.log" 2>&1
    at "rma lat $b $i rc=$?"
  done
done
for i in 1 2; do
  for b in old new; do
    [ "$(left)" -gt 12 ] || break 2
    if [ $b = old ]; then run=$now/gnio-run perf=$now/gnio-perf lib=$now${ucx:+:$ucx}
    else run=$R perf=$P lib=${ucx:-}; fi
    LD_LIBRARY_PATH=$lib GNIO_BACKEND=cuda timeout 20 tests/gpu/concurrent-ranks.sh 2 $run -n 2 \
      --timeout 18 -- $perf msg --mode lat -b 8 -e 64K -f 8 --reps 5 >"$x/msg-$b-$i.log" 2>&1
    at "msg lat $b $i rc=$?"
  done
done
finish
