#!/usr/bin/env bash
# The network backends side by side on one CPU machine (host backend, 2 ranks declared as 2 nodes,
# so every operation goes through the proxy): tcp, ucx with UCX's own transport choice (shared
# memory / cma on one host) and ucx over UCX's tcp transport. gnio-perf rma (put, get,
# put_signal, atomics: latency and bandwidth) and coll (allreduce), JSON per backend in $OUT, then
# one table per measurement (bench/net-table.py), and each backend's figures as ratios to raw TCP
# on the same machine (gnio-tcp-floor, run first; bench/net-vs-floor.py: vs-floor-NAME.md).
#
#   BUILD=build OUT=bench/results/DATE-cpu-tcp-vs-ucx bench/run-net-cpu.sh
#
# RMA_MAX / AR_MAX cap the sizes (default 1M / 4M); REPS the timed launches per point (default 9);
# STAGED=1 adds the staged configurations, RMA_WORDS=1 UCX atomics (below).
# NETNS=1 runs the ranks on two network namespaces joined by a veth pair instead (a real TCP/IP
# path between two "hosts"; tests/common/netns_run.sh, needs root).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/out/net-cpu}
mkdir -p "$out"
run=$build/tools/gnio-run/gnio-run
perf=$build/perf/gnio-perf/gnio-perf
configs=("tcp:GNIO_NET=tcp" "ucx:GNIO_NET=ucx" "ucx-tcp:GNIO_NET=ucx UCX_TLS=tcp")
# STAGED=1 adds the staged paths GPUs without GPUDirect take, forced on the host backend: tcp
# through bounce buffers, and ucx (over its tcp transport) with heap data as request messages.
[ "${STAGED:-0}" = 1 ] && configs+=("tcp-staged:GNIO_NET=tcp GNIO_PROXY_STAGING=always"
  "ucx-tcp-staged:GNIO_NET=ucx UCX_TLS=tcp GNIO_PROXY_STAGING=always")
# RMA_WORDS=1 adds ucx over tcp with signals and atomics as UCX atomics instead of word messages
# (GNIO_UCX_WORD_OPS=rma; needs a UCX older than 1.16 over tcp).
[ "${RMA_WORDS:-0}" = 1 ] && configs+=("ucx-tcp-rma:GNIO_NET=ucx UCX_TLS=tcp GNIO_UCX_WORD_OPS=rma")
# Each rank on its own CPUs (gnio-run --bind cores; BIND=none leaves them to the scheduler, which
# on 2 cores often puts a rank's receiving thread beside the peer's sending one).
launch=("$run" -n 2 --nodes 2 --bind "${BIND:-cores}" --timeout 600 --)
[ "${NETNS:-0}" = 1 ] && launch=("$root/tests/common/netns_run.sh" 1)
# The floor first: raw TCP on this machine, what every figure below is a ratio to (vs-floor.md).
"$build/perf/probes/gnio-tcp-floor" --json "$out/floor.json" | tee "$out/floor.txt"
for c in "${configs[@]}"; do
  name=${c%%:*}
  echo "== $name: ${c#*:}"
  env ${c#*:} GNIO_BACKEND=host "${launch[@]}" "$perf" rma \
    --op put,get,put_signal,atomic --scope block --mode lat,bw -b 8 -e "${RMA_MAX:-1M}" -f 8 \
    --reps "${REPS:-9}" --json "$out/rma-$name.json" >"$out/rma-$name.log" 2>&1
  env ${c#*:} GNIO_BACKEND=host "${launch[@]}" "$perf" coll \
    --coll allreduce -b 8 -e "${AR_MAX:-4M}" -f 8 --inplace 0 --reps "${REPS:-9}" \
    --json "$out/allreduce-$name.json" >"$out/allreduce-$name.log" 2>&1
  env ${c#*:} GNIO_BACKEND=host "${launch[@]}" "$perf" msgrate --op put_signal -n 1000 \
    --json "$out/msgrate-$name.json" >"$out/msgrate-$name.log" 2>&1
done
for c in "${configs[@]}"; do
  name=${c%%:*}
  python3 "$root/bench/net-vs-floor.py" --floor "$out/floor.json" "$out/rma-$name.json" \
    "$out/allreduce-$name.json" "$out/msgrate-$name.json" --markdown "$out/vs-floor-$name.md" \
    --title "gnio-perf through the proxy ($name) against raw TCP on this machine" >/dev/null
done
args=()
for c in "${configs[@]}"; do args+=("${c%%:*}=$out/rma-${c%%:*}.json"); done
python3 "$root/bench/net-table.py" "${args[@]}" --markdown "$out/rma.md" \
  --title "gnio-perf rma through the proxy: tcp vs ucx (host backend, 2 ranks as 2 nodes)"
args=()
for c in "${configs[@]}"; do args+=("${c%%:*}=$out/allreduce-${c%%:*}.json"); done
python3 "$root/bench/net-table.py" "${args[@]}" --markdown "$out/allreduce.md" \
  --title "gnio-perf coll allreduce through the proxy: tcp vs ucx (host backend, 2 ranks as 2 nodes)"
