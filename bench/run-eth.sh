#!/usr/bin/env bash
# Packet rates through an eth::Port against the same loop on a CPU thread and against a UDP
# socket, on a veth pair between two network namespaces made here (root), same run:
#
#   bench/run-eth.sh BUILD_DIR [OUT_DIR]        (SIZES="64 1500", SECONDS_RX=2, TX_COUNT=200000)
#
# RX: the generator namespace blasts UDP frames with sendmmsg() for SECONDS_RX; the receiver
# counts what it took (gnio: a kernel, GNIO_BACKEND picks GPU or host; cpu: a std::thread running
# the same ring code; udp: recvmmsg() on a socket). TX: the receiver namespace sends TX_COUNT
# frames (gnio, cpu: through the port's TX ring; udp: sendmmsg()), timed until Linux completed
# them. Lines go to OUT_DIR/eth.txt; OUT_DIR/eth.md is the table. On a 2-core machine the
# generator and the receiver share the cores: RX figures may be the generator's limit (the udp
# generator's own rate is printed beside them).
set -uo pipefail
B=${1:?usage: run-eth.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
mkdir -p "$out"
tool=$B/perf/probes/gnio-eth-bench
run=$B/tools/gnio-run/gnio-run
[ "$(id -u)" = 0 ] || { echo "run-eth.sh: needs root (network namespaces, AF_XDP)" >&2; exit 77; }
tag=gb$$
ns=("gnio-$tag-r" "gnio-$tag-g")
dev=("${tag}r" "${tag}g")
addr=(10.97.0.1 10.97.0.2)
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done; }
trap cleanup EXIT
ip netns add "${ns[0]}" && ip netns add "${ns[1]}" &&
  ip link add "${dev[0]}" netns "${ns[0]}" type veth peer name "${dev[1]}" netns "${ns[1]}" || exit 1
for i in 0 1; do
  ip -n "${ns[$i]}" link set lo up
  ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${dev[$i]}"
  ip -n "${ns[$i]}" link set "${dev[$i]}" up
done
mac() { ip -n "${ns[$1]}" -o link show "${dev[$1]}" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2; }
ip -n "${ns[1]}" neigh replace "${addr[0]}" lladdr "$(mac 0)" dev "${dev[1]}" nud permanent
ip -n "${ns[0]}" neigh replace "${addr[1]}" lladdr "$(mac 1)" dev "${dev[0]}" nud permanent
in_r() { ip netns exec "${ns[0]}" "$@"; }
in_g() { ip netns exec "${ns[1]}" "$@"; }
secs=${SECONDS_RX:-2}
# Generator processes: on a veth pair the sender's CPU also runs the receive path, so one sender
# can be the limit of what a receiver is shown to take. GEN_PROCS (default: a quarter of the
# cores, 1..4) senders blast at once.
gens=${GEN_PROCS:-$(n=$(($(nproc) / 4)); [ $n -lt 1 ] && n=1; [ $n -gt 4 ] && n=4; echo $n)}
log=$out/eth.txt
: >"$log"
{
  echo "# bench/run-eth.sh, $(date -u +%FT%TZ), $(hostname), backend ${GNIO_BACKEND:-auto}, $(nproc) cores"
  for size in ${SIZES:-64 1500}; do
    for via in gnio cpu udp; do
      if [ "$via" = udp ]; then
        in_r "$tool" rx --via udp --port 9 --seconds $((secs + 2)) --size "$size" &
      else
        in_r "$run" -n 1 --timeout 60 -- "$tool" rx --via "$via" "${dev[0]}" --seconds $((secs + 2)) \
          --size "$size" &
      fi
      rx=$!
      sleep 1.5  # the port opens (and loads its XDP program) before the generator starts
      echo "# rx run: $via $size B, $gens generator(s)"
      gp=()
      for _ in $(seq 1 "$gens"); do
        in_g "$tool" tx --via udp --dst "${addr[0]}" --size "$size" --seconds "$secs" |
          sed 's/^tx udp/generator (udp tx)/' &
        gp+=($!)
      done
      wait "${gp[@]}"
      wait "$rx"
    done
    for via in gnio cpu; do
      in_r "$run" -n 1 --timeout 60 -- "$tool" tx --via "$via" "${dev[0]}" --dst-mac "$(mac 1)" \
        --src "${addr[0]}" --dst "${addr[1]}" --size "$size" --count "${TX_COUNT:-200000}"
    done
    in_r "$tool" tx --via udp --dst "${addr[1]}" --size "$size" --count "${TX_COUNT:-200000}"
  done
} 2>&1 | sed 's/^\[0\] //' | tee "$log"
python3 - "$log" >"$out/eth.md" <<'PY'
import re, sys
rows, gens, run = {}, {}, None
for line in open(sys.argv[1]):
    r = re.match(r"# rx run: ([a-z]+) (\d+) B", line)
    if r:
        run = (r.group(1), int(r.group(2)))
        continue
    m = re.match(r"(rx|tx|generator \(udp tx\)) (?:([a-z]+) )?(\d+) B: .* = ([\d.]+) Mpps, ([\d.]+) Gb/s", line)
    if not m: continue
    d, via, size, mpps = m.group(1), m.group(2) or "udp", int(m.group(3)), float(m.group(4))
    if d.startswith("generator"):
        # Senders of one run add up; runs stay apart.
        per_run = gens.setdefault(size, {})
        per_run[run] = per_run.get(run, 0.0) + mpps
        continue
    rows.setdefault((d, size), {})[via] = mpps
print("| direction | frame | gnio (kernel) | cpu thread (AF_XDP) | udp socket | gnio / cpu | gnio / udp |")
print("|---|---|---|---|---|---|---|")
for (d, size), v in sorted(rows.items()):
    g, c, u = v.get("gnio"), v.get("cpu"), v.get("udp")
    f = lambda x: "%.3f Mpps" % x if x is not None else "-"
    r = lambda a, b: "%.2f" % (a / b) if a and b else "-"
    print(f"| {d} | {size} B | {f(g)} | {f(c)} | {f(u)} | {r(g, c)} | {r(g, u)} |")
missing = [f"{d} {size} B {via}" for (d, size), v in sorted(rows.items()) for via in ("gnio", "cpu")
           if not v.get(via)]
if gens:
    print("\nRX generators (sendmmsg in the other namespace, their rates added) during the gnio, cpu and udp runs: " +
          "; ".join("%d B %s Mpps" % (s, " / ".join("%.3f" % g for g in v.values())) for s, v in sorted(gens.items())))
if missing:
    sys.exit("run-eth.sh: no figure for " + ", ".join(missing))
PY
st=$?
cat "$out/eth.md"
exit $st
