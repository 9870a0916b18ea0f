#!/usr/bin/env bash
# What one GPU-machine session builds, tests and measures, in as few calls as the scarce device
# time allows. Steps run in the order given (default: all of them, in the order below):
#
#   tests/gpu/session-run.sh [STEP...]
#
#   build      configure (RelWithDebInfo, cuda backend, GPU tests, nvshmem-perf when NVSHMEM is
#              found) and build everything into ./build-gpu
#   build-perf the same configuration, building only gnio-run, gnio-perf and gnio-info (or the
#              targets in BUILD_TARGETS); CMAKE_EXTRA adds configure arguments to both (e.g.
#              -DGNIO_COLL=OFF: no collective kernels, a build of minutes). The tools need CLI11
#              and nlohmann-json (header-only): where the system has neither, TOOL_DEBS (default
#              .deps/tool-debs: libcli11-dev and nlohmann-json3-dev, fetched beforehand with
#              scripts/fetch-tool-debs.sh on a machine with the registry) is unpacked at the
#              start into .deps/tool-headers, where CMake looks for them
#   suite      every GPU-labelled test (ctest -L gpu)
#   examples   ping-pong, ring pipeline, halo exchange, gnio-info --json, request/response (also
#              as 2 nodes) on 2 ranks
#   init       communicator creation, gnio vs ncclCommInitRank
#   coll       bench/run-coll.sh: collectives vs NCCL (the issue's sweep, CUDA graphs)
#   coll-eager allreduce vs NCCL without graphs (-G 0)
#   tune       bench/tune-coll.sh: launch shapes and algorithm thresholds of the collectives
#   rma        bench/run-rma.sh: one-sided operations vs NVSHMEM
#   probe      raw peer-to-peer probe (link floor)
#   quick      gnio-perf rma --quick and coll --quick (the README's first command's job)
#   coll-kernel gnio-perf coll-kernel: allreduce inside a running kernel, every algorithm
#   msgrate    gnio-perf msgrate: 8-byte put_signal, put and signal rates over NVLink
#   net        the proxy over tcp (the 2 GPUs declared as 2 nodes): allreduce vs NCCL over its
#              socket transport (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket, CUDA
#              graphs), put/put_signal latency and bandwidth, the proxy's 8-byte message rate,
#              after raw TCP on this machine (gnio-tcp-floor) and with every figure as a ratio to
#              it (r/net/vs-floor.md, bench/net-vs-floor.py); with one GPU run it under MPS;
#              NET_MAX caps the sizes (default 256M; NET_AR_MAX, NET_RMA_MAX each one),
#              NET_MSGRATE=0 skips the message rate, NET_TIMEOUT bounds each run (300 s)
#   net-one-gpu the same figures on one GPU, each run under its own MPS daemon: floor, put /
#              put_signal latency, message rates (NET_RATE_SHAPE), a 64 MiB put (1 and 16 blocks),
#              allreduce 8 B..NET_AR_MAX (no NCCL: its socket run needs 2 GPUs); NET_PARTS picks
#              (default "lat rate put allreduce"); the floor is measured once per r/
#   eth        packet I/O with the cuda backend: every sample's test (tests/eth/*_test.sh) and
#              bench/run-eth.sh on a veth pair. ETH_DEBS (default .deps/eth-debs): the .deb files
#              the machine lacks (iproute2 iputils-ping libxdp1 libxdp-dev libbpf1 libbpf-dev and
#              their libraries), unpacked at the start so the build finds libxdp's headers;
#              ETH_BUILD: the build tree (default build-gpu)
#   net-socks  allreduce through the proxy with GNIO_NET_NSOCKS from NET_NSOCKS_LIST (default
#              "1 4 8"), sizes NET_SOCKS_MIN..NET_SOCKS_MAX (4M..64M), beside NCCL over sockets;
#              then allreduce with ring forced (8 B..256 KiB, the one-hop oneshot's baseline) and
#              a 64 MiB put's bandwidth (NET_PUT_MAX) per connection count, split over
#              NET_PUT_BLOCKS blocks (default "1 16")
#   ucx        the ucx backend (GNIO_NET=ucx) with the 2 GPUs declared as 2 nodes: the RMA and
#              collective suites, put/put_signal latency and bandwidth and an allreduce sweep
#              beside NCCL over sockets. Needs a UCX with CUDA (scripts/fetch-ucx-cuda.sh puts
#              one in .deps/ucx-cu12, which the build steps then configure with: UCX_ROOT);
#              UCX_TLS is passed on (UCX picks cuda_ipc between GPUs of one host unless told)
#   ucx-quick  the ucx backend without the collective test binary (builds in minutes: BUILD_TARGETS
#              "gnio-run gnio-perf rma_test_2_gpu"): the RMA suite as 2 nodes over ucx and over
#              tcp, every collective through gnio-perf over ucx (f32 sum, 8 B..4 MiB, every element
#              checked), and put / put_signal latency over ucx and over tcp
#   ucx-staged the ucx backend with a UCX without CUDA support (UCX_DEBS: Debian's), which stages
#              GPU memory through host memory: the RMA suite as 2 nodes when rma_test_2_gpu was
#              built, the ucx-quick gnio-perf checks (collectives when built with them), and put /
#              put_signal / get / atomic latency and put bandwidth over ucx and over tcp
#              (STAGED_PERF=0 skips them); the collective suite over ucx when coll_test_2(_gpu)
#              was built
#   hier       the hierarchical allreduce and allgather on 4 ranks as 2 nodes: gnio-perf coll's
#              checks with GNIO_COLL_HIER=on and off (heap buffers with graphs, private ones
#              eager), then the suite's allreduce and allgather tests hierarchical when
#              coll_test_2_gpu (or coll_test_2) was built (HIER_S, HIER_MAX)
#   crash-4x2  the RMA barrier tests on 4 ranks as 2 nodes, with a crashing rank's stack resolved
#   soak-long  the long soak (100 000 RMA operations, 10 000 collectives) on 2 ranks (one per GPU)
#              and on 4 ranks (two per GPU); SOAK_RANKS picks, SOAK_S caps each (default 240 s)
#   sanitize   compute-sanitizer memcheck on the functional suites
#   racecheck  compute-sanitizer racecheck and synccheck on the RMA and collective device tests
#   sanitize-coll memcheck, racecheck and synccheck on the whole collective suite (each capped at
#              SANITIZE_COLL_S seconds, default 180)
#   sanitize-all memcheck, racecheck and synccheck on every GPU test but those that make CUDA
#              fail on purpose (gpu_fault) or kill ranks (liveness: a killed target process makes
#              the tool report the kill, not a defect); each capped at SANITIZE_ALL_S (default 400)
#              (SANITIZE_TOOLS narrows the tools: a whole run outlasts one device call)
#   build-time from scratch and timed: configure, gnio + gnio-perf, then every other target (GPU
#              tests included) into ./build-gpu; r/build-time.txt has the times, libgnio.so's size
#              and the slowest translation units
#   msg        gnio-perf msg (two-sided messages beside put_signal and put), p2p and through the
#              proxy, each under its own MPS daemon (MSG_MAX, MSG_NET_MAX)
#   msg-sweep  gnio-perf msg latency 8 B..64 KiB at depths MSG_DEPTHS and bandwidth 1..64 MiB with
#              slots of MSG_SLOTS, under one MPS daemon
#   net-ab     the RMA latency table and 8-byte message rates through the tcp proxy under two
#              settings (NET_AB_A, NET_AB_B; default GNIO_PROXY_AGENT=0 and =1), NET_AB_RUNS runs
#   delivery   gnio-delivery-probe (a signal handed to the GPU by launch, stream write, resident
#              agent; idle and beside resident kernels), plainly and under MPS
#   python     the Python package from the build tree (CMAKE_EXTRA=-DGNIO_PYTHON=ON at configure):
#              python/tests under gnio-run (torch CUDA tensors), the torch example and the custom
#              extension example under torchrun, and the Python call's overhead beside gnio-perf's
#              C++ call (3 runs each, r/python/overhead.md); 2 ranks under MPS
#   dropin     PyTorch with LD_PRELOAD=libgnio_nccl.so under torchrun (tests/nccl/torch_dropin_test.py:
#              every collective, send/recv, barrier, DDP against gloo) and the drop-in's per-call
#              overhead over gnio's own call; 2 ranks under MPS
#   rate-vs-old the proxy's 8-byte message rates through tcp (gnio-perf msgrate; RATE_OPS,
#              RATE_SHAPES, RATE_RUNS), this build beside OLD_DIR's, 2 ranks as 2 nodes under MPS
#   mpirun     a plain `mpirun -np 2` of gnio-info --json, ping_pong and the creation benchmark
#              (no address given: the one-host rendezvous), beside gnio-run's creation time
#   vs-old     this build beside an older one's stripped libgnio.so.0 + gnio-perf in OLD_DIR
#              (default .old): VS_OLD_RUNS (5) interleaved runs each of the stream allreduce,
#              allgather and reduce_scatter (CUDA graphs, 8 B..VS_OLD_MAX=64M) and the in-kernel
#              allreduce (sizes x VS_OLD_F, default 4), 2 ranks under MPS; VS_OLD_TOP (default 64M)
#              adds that one size when the steps of VS_OLD_F skip it; VS_OLD_G (graph length,
#              default 20), VS_OLD_ITERS (calls per measurement, -n) and VS_OLD_REPS (measurements
#              per point) trade time for steadier small-size points; VS_OLD_RMA=1 adds the
#              RMA latency table (8 B..64 KiB), VS_OLD_NET=1 the same through the tcp proxy (2
#              ranks as 2 nodes, 8 B..4 KiB); r/vs-old/compare.md, r/vs-old/net/compare.md
#              (bench/compare-builds.py)
#
# Each step's output: ${OUT:-./out}/r/STEP.log; one status line per step in r/steps.txt (also
# printed); r/ is packed into ${OUT}/all.tgz every 20 s and at the end, so a call cut short still
# returns what ran. SUITE_FILTER (ctest -R regex) narrows the suite step, SUITE_EXCLUDE (ctest -E
# regex) leaves tests out of it: a whole suite outlasts one 10-minute device call after a build.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/out}
r=$out/r
mkdir -p "$r"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
jobs=$(nproc)
# NCCL refuses two ranks on one GPU: steps that compare with it need two.
gpu_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
B=$root/build-gpu
R=$B/tools/gnio-run/gnio-run
P=$B/perf/gnio-perf/gnio-perf
nccl_dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
[ -n "$nccl_dir" ] && export GNIO_BENCH_NCCL_LIB=$nccl_dir/lib/libnccl.so.2

# A UCX with CUDA support carried here (scripts/fetch-ucx-cuda.sh), for the ucx backend.
ucx_root=${UCX_ROOT:-}
if [ -z "$ucx_root" ] && [ -d "$root/.deps/ucx-cu12/libucx/lib" ]; then
  ucx_root=$root/.deps/ucx-cu12/libucx
  # Symbolic links may not survive the trip: name each library's short forms again.
  for f in "$ucx_root"/lib/*.so.0.0.0 "$ucx_root"/lib/ucx/*.so.0.0.0; do
    ln -sf "$(basename "$f")" "${f%.0.0}"
    ln -sf "$(basename "$f")" "${f%.0.0.0}"
  done
fi
# Or Debian's UCX (no CUDA support: the ucx backend stages GPU memory through host memory),
# its packages fetched beforehand (apt-get download on a machine with the registry) into UCX_DEBS (libucx0 libucx-dev
# libibverbs1 librdmacm1 libnuma1) and unpacked here with dpkg -x, never into /.
if [ -z "$ucx_root" ] && [ -n "${UCX_DEBS:-}" ]; then
  for f in "$UCX_DEBS"/*.deb; do dpkg -x "$f" "$root/.deps/ucx-debian"; done
  ucx_root=$root/.deps/ucx-debian/usr
fi
# Packet I/O: libxdp, libbpf (headers and libraries), iproute2 and ping as .deb files in
# ETH_DEBS (default .deps/eth-debs, `apt-get download`ed elsewhere), unpacked here, never into /;
# the build steps then find libxdp's headers there (GNIO_XDP_ROOT).
eth_root=
if ls "${ETH_DEBS:-$root/.deps/eth-debs}"/*.deb >/dev/null 2>&1; then
  for f in "${ETH_DEBS:-$root/.deps/eth-debs}"/*.deb; do dpkg -x "$f" "$root/.deps/eth"; done
  eth_root=$root/.deps/eth
fi
# The tools' header-only CLI11 and nlohmann-json, when the system lacks them: the .deb files in
# TOOL_DEBS (default .deps/tool-debs, scripts/fetch-tool-debs.sh elsewhere) unpacked here, never
# into /; CMake finds them in .deps/tool-headers/usr (cmake/GnioToolHeaders.cmake).
if [ ! -f /usr/include/CLI/CLI.hpp ] || [ ! -f /usr/include/nlohmann/json.hpp ]; then
  if ls "${TOOL_DEBS:-$root/.deps/tool-debs}"/*.deb >/dev/null 2>&1; then
    for f in "${TOOL_DEBS:-$root/.deps/tool-debs}"/*.deb; do dpkg -x "$f" "$root/.deps/tool-headers"; done
  else
    echo "no CLI11/nlohmann-json headers and no .deb files in ${TOOL_DEBS:-$root/.deps/tool-debs}:" \
      "the tools will not configure (scripts/fetch-tool-debs.sh)" | tee -a "$r/steps.txt"
  fi
fi
[ -n "$ucx_root" ] && export LD_LIBRARY_PATH=$ucx_root/lib:$ucx_root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

pack() { tar czf "$out/all.tgz.tmp" -C "$out" r 2>/dev/null && mv "$out/all.tgz.tmp" "$out/all.tgz"; }
(while sleep 20; do pack; done) &
packer=$!
trap 'kill $packer 2>/dev/null; [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && mps_stop; pack' EXIT

step() {  # step NAME command...: runs it with its output in $r/NAME.log and records the status
  local name=$1
  shift
  local t0=$SECONDS
  echo "--- $name: $*" >"$r/$name.log"
  "$@" >>"$r/$name.log" 2>&1
  local rc=$?
  printf '%-11s rc=%-3d %4ds  (at %ds)\n' "$name" "$rc" $((SECONDS - t0)) "$SECONDS" \
    | tee -a "$r/steps.txt"
  return $rc
}

# MPS (private directories, stopped at the end of the script): ranks sharing the one GPU run their
# kernels at once instead of in ~2 ms time slices. Needed for any timing between ranks there.
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=$out/mps-pipe CUDA_MPS_LOG_DIRECTORY=$r/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && echo "MPS started" | tee -a "$r/steps.txt"
}
mps_stop() {
  echo quit | nvidia-cuda-mps-control 2>/dev/null
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# The RMA tests the proxy's network backends run (as 2 nodes).
rma_net_filter='--gtest_filter=Rma.Put*:Rma.Get*:Rma.Atomics*:Rma.SignalsAndComparisons:Rma.BarrierWorld*'

sanitize_tests='^(rma_test_2_gpu|heap_test_2_gpu|window_test_2_gpu|coll_types_test_gpu|rma_fault_BadInput_PeerOutOfRangeIsInvalidArgument_gpu)$'

# Which gnio-perf an old-against-new step runs and the library path it needs (the caller's locals
# perf and env_lib): `new`, this build; `old`, OLD_DIR's carried binaries (default .old).
use_build() {
  perf=$P
  env_lib=()
  if [ "$1" = old ]; then
    local old=${OLD_DIR:-$root/.old}
    perf=$old/gnio-perf
    env_lib=(LD_LIBRARY_PATH="$old${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
}

run_step() {
  case $1 in
    build | build-perf)
      {
        echo "date: $(date -u +%FT%TZ)  host: $(hostname)"
        echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
        nvidia-smi; nvidia-smi topo -m; nvcc --version
      } >"$r/gpu-info.log" 2>&1
      local gen=()
      [ ! -f "$B/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
      step configure cmake -S "$root" -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DGNIO_CUDA=ON -DGNIO_GPU_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        ${ucx_root:+-DUCX_ROOT="$ucx_root"} ${eth_root:+-DGNIO_XDP_ROOT="$eth_root/usr"} \
        ${CMAKE_EXTRA:-} &&
        if [ "$1" = build ]; then
          step build cmake --build "$B" --parallel "$jobs" -- $([ -f "$B/build.ninja" ] && echo -k 0)
        else
          step build-perf cmake --build "$B" --parallel "$jobs" --target \
            ${BUILD_TARGETS:-gnio-run gnio-perf gnio-info}
        fi ;;
    suite)
      # SUITE_MPS=1: under MPS, so that ranks sharing one GPU run at once (on one GPU without it
      # every wait between two ranks costs ~2 ms time slices; perf_coll_quick_gpu outlasts its
      # timeout). SUITE_JOBS: tests at once (default 1).
      [ "${SUITE_MPS:-0}" = 1 ] && mps_start
      step suite ctest --test-dir "$B" -L gpu --output-on-failure --no-tests=error \
        -j "${SUITE_JOBS:-1}" --output-junit "$r/ctest-gpu.xml" ${SUITE_FILTER:+-R "$SUITE_FILTER"} \
        ${SUITE_EXCLUDE:+-E "$SUITE_EXCLUDE"}
      [ "${SUITE_MPS:-0}" = 1 ] && mps_stop ;;
    examples)
      step examples bash -c "$R -n 2 -- $B/examples/ping_pong/ping_pong 10000 &&
        $R -n 2 -- $B/examples/ring_pipeline/ring_pipeline 256 65536 &&
        $R -n 2 -- $B/examples/halo_exchange/halo_exchange 1048576 200 &&
        $R -n 2 -- $B/tools/gnio-info/gnio-info --json &&
        $R -n 2 -- $B/examples/request_response/request_response 200 &&
        GNIO_NET=tcp $R -n 2 --nodes 2 -- $B/examples/request_response/request_response 50" ;;
    init) step init "$R" -n 2 -- "$B/perf/init/init_bench" 9 ;;
    coll) step coll env BUILD="$B" OUT="$r/coll" bench/run-coll.sh ;;
    coll-eager)
      step coll-eager env BUILD="$B" OUT="$r/coll-eager" COLLS=allreduce bench/run-coll.sh \
        -b 8 -e 1G -f 2 -d f32 -o sum --inplace 0 -G 0 ;;
    tune) step tune env BUILD="$B" OUT="$r/tune" bench/tune-coll.sh ;;
    rma) step rma env BUILD="$B" OUT="$r/rma" bench/run-rma.sh ;;
    probe) [ -x "$B/perf/probes/gnio-p2p-probe" ] && step probe "$B/perf/probes/gnio-p2p-probe" ;;
    quick)
      local vs=--vs-nccl
      [ "$gpu_count" -lt 2 ] && vs=
      step quick bash -c "$R -n 2 -- $P rma --quick && $R -n 2 -- $P coll --quick $vs" ;;
    coll-kernel)
      mkdir -p "$r/coll-kernel"
      for algo in auto ll oneshot twoshot; do
        step "coll-kernel-$algo" "$R" -n 2 -- "$P" coll-kernel -b 8 -e 64K --algo "$algo" \
          --json "$r/coll-kernel/coll-kernel-$algo.json"
      done ;;
    msgrate)
      mkdir -p "$r/msgrate"
      for op in put_signal put signal; do
        step "msgrate-$op" "$R" -n 2 -- "$P" msgrate --op "$op" --json "$r/msgrate/msgrate-$op.json"
      done ;;
    net)
      mkdir -p "$r/net"
      step net-floor "$B/perf/probes/gnio-tcp-floor" --json "$r/net/floor.json"
      step net-allreduce env GNIO_NET=tcp NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket \
        "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- "$P" coll --coll allreduce -b 8 \
        -e "${NET_AR_MAX:-${NET_MAX:-256M}}" -f 4 --vs-nccl --json "$r/net/allreduce-tcp.json"
      step net-rma env GNIO_NET=tcp "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- "$P" rma \
        --op put,put_signal --scope block --mode lat,bw -b 8 -e "${NET_RMA_MAX:-${NET_MAX:-256M}}" \
        -f 8 --reps 3 --json "$r/net/rma-tcp.json"
      [ "${NET_MSGRATE:-1}" = 1 ] &&
        step net-msgrate env GNIO_NET=tcp "$R" -n 2 --nodes 2 --timeout 120 -- "$P" msgrate \
          --op put_signal --grid 8 --block 128 -n 200 --json "$r/net/msgrate-tcp.json"
      step net-vs-floor python3 bench/net-vs-floor.py --floor "$r/net/floor.json" \
        "$r/net/rma-tcp.json" "$r/net/allreduce-tcp.json" "$r/net/msgrate-tcp.json" \
        --markdown "$r/net/vs-floor.md" ;;
    net-one-gpu)
      # The issue-22 table on one GPU: each run under its own MPS daemon (concurrent-ranks.sh), so
      # a run cut short by its timeout cannot leave a broken MPS server to the next. Floor first;
      # latency 8 B..64 KiB; message rates (NET_RATE_SHAPE, default 8 x 128 x 200); a 64 MiB put
      # with 1 and 16 blocks; allreduce 16..NET_AR_MAX (256M) beside nothing (NCCL needs 2 GPUs).
      mkdir -p "$r/net"
      local C="$root/tests/gpu/concurrent-ranks.sh 2"
      local shape=(${NET_RATE_SHAPE:---grid 8 --block 128 -n 200})
      local parts=" ${NET_PARTS:-lat rate put allreduce} "
      [ -f "$r/net/floor.json" ] ||
        step net-floor "$B/perf/probes/gnio-tcp-floor" --json "$r/net/floor.json"
      [[ $parts == *" lat "* ]] && step net-lat env GNIO_NET=tcp $C "$R" -n 2 --nodes 2 --timeout 120 -- "$P" rma \
        --op put,put_signal --scope block --mode lat -b 8 -e 64K -f 8 --reps 3 \
        --json "$r/net/rma-lat-tcp.json"
      [[ $parts == *" rate "* ]] && for op in put put_signal signal; do
        step "net-rate-$op" env GNIO_NET=tcp $C "$R" -n 2 --nodes 2 --timeout 60 -- "$P" msgrate \
          --op $op "${shape[@]}" --json "$r/net/msgrate-tcp-$op.json"
      done
      [[ $parts == *" put "* ]] && for nb in 1 16; do
        step "net-put64M-b$nb" env GNIO_NET=tcp $C "$R" -n 2 --nodes 2 --timeout 120 -- "$P" rma \
          --op put --scope block --mode bw --blocks $nb -b 64M -e 64M --reps 3 \
          --json "$r/net/put64M-tcp-b$nb.json"
      done
      [[ $parts == *" allreduce "* ]] &&
        step net-allreduce env GNIO_NET=tcp $C "$R" -n 2 --nodes 2 --timeout 200 -- "$P" coll \
        --coll allreduce -b 8 -e "${NET_AR_MAX:-256M}" -f 16 --json "$r/net/allreduce-tcp.json"
      step net-vs-floor bash -c 'python3 bench/net-vs-floor.py --floor "$1/floor.json" \
        $(ls "$1"/rma-lat-tcp.json "$1"/msgrate-tcp-*.json "$1"/put64M-tcp-b*.json \
        "$1"/allreduce-tcp.json 2>/dev/null) --markdown "$1/vs-floor.md"' _ "$r/net" ;;
    eth)
      # Packet I/O on the GPU: the ICMP echo test (a kernel answers 1000 pings through an AF_XDP
      # port on a veth pair) and bench/run-eth.sh, cuda backend. What the machine lacks comes as
      # .deb files in ETH_DEBS (default .deps/eth-debs: iproute2 iputils-ping libxdp1 libbpf1 and
      # their libraries, `apt-get download`ed), unpacked here with dpkg -x, never into /.
      # ETH_BUILD: a build tree with gnio-run, icmp_echo and gnio-eth-bench (default build-gpu).
      local eb=${ETH_BUILD:-$B} ed=$root/.deps/eth
      [ -n "$eth_root" ] || { echo "eth: no .deb files in ${ETH_DEBS:-$root/.deps/eth-debs}" | tee -a "$r/steps.txt"; return 1; }
      local lib=$ed/usr/lib/x86_64-linux-gnu:$ed/lib/x86_64-linux-gnu
      (
        export PATH=$PATH:$ed/usr/bin:$ed/bin:$ed/sbin:$ed/usr/sbin
        export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib
        export LIBXDP_OBJECT_PATH=$ed/usr/lib/x86_64-linux-gnu/bpf GNIO_BACKEND=cuda
        step eth-icmp "$root/tests/eth/icmp_echo_test.sh" "$eb/tools/gnio-run/gnio-run" \
          "$eb/examples/eth_icmp_echo/icmp_echo" "${ETH_PINGS:-1000}"
        for t in udp_flows:eth_udp_flows/udp_flows udp_echo:eth_udp_echo/udp_echo \
                 send_bursts:eth_send_bursts/send_bursts http_server:eth_http/http_server; do
          step "eth-${t%%:*}" "$root/tests/eth/${t%%:*}_test.sh" "$eb/tools/gnio-run/gnio-run" \
            "$eb/examples/${t#*:}"
        done
        step eth-rates bash "$root/bench/run-eth.sh" "$eb" "$r/eth"
      ) ;;
    net-socks)
      mkdir -p "$r/net"
      for ns in ${NET_NSOCKS_LIST:-1 4 8}; do
        step "net-ar-socks$ns" env GNIO_NET=tcp GNIO_NET_NSOCKS=$ns NCCL_P2P_DISABLE=1 \
          NCCL_SHM_DISABLE=1 NCCL_NET=Socket "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- \
          "$P" coll --coll allreduce -b "${NET_SOCKS_MIN:-4M}" -e "${NET_SOCKS_MAX:-64M}" -f 4 \
          --inplace 0 --vs-nccl --json "$r/net/allreduce-tcp-socks$ns.json"
        for nb in ${NET_PUT_BLOCKS:-1 16}; do
          step "net-put-socks$ns-b$nb" env GNIO_NET=tcp GNIO_NET_NSOCKS=$ns "$R" -n 2 --nodes 2 \
            --timeout "${NET_TIMEOUT:-300}" -- "$P" rma --op put --scope block --mode bw \
            --blocks "$nb" -b "${NET_PUT_MAX:-64M}" -e "${NET_PUT_MAX:-64M}" --reps 3 \
            --json "$r/net/put-tcp-socks$ns-b$nb.json"
        done
      done
      step net-ar-ring env GNIO_NET=tcp "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- \
        "$P" coll --coll allreduce -b 8 -e 256K -f 4 --inplace 0 --algo ring \
        --json "$r/net/allreduce-tcp-ring.json" ;;
    ucx)
      mkdir -p "$r/net"
      step ucx-info bash -c "ucx_info -v 2>/dev/null; ldd $B/src/libgnio.so | grep -i uc"
      step ucx-rma env GNIO_NET=ucx GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 timeout 300 "$R" -n 2 \
        --nodes 2 --timeout 280 -- "$B/tests/rma/rma_test_2_gpu" "$rma_net_filter"
      step ucx-coll env GNIO_NET=ucx GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 timeout 400 "$R" -n 2 \
        --nodes 2 --timeout 380 -- "$B/tests/coll/coll_test_2_gpu"
      step ucx-perf-rma env GNIO_NET=ucx "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- \
        "$P" rma --op put,put_signal --scope block --mode lat,bw -b 8 \
        -e "${NET_RMA_MAX:-${NET_MAX:-64M}}" -f 8 --reps 3 --json "$r/net/rma-ucx.json"
      step ucx-perf-ar env GNIO_NET=ucx NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket \
        "$R" -n 2 --nodes 2 --timeout "${NET_TIMEOUT:-300}" -- "$P" coll --coll allreduce -b 8 \
        -e "${NET_AR_MAX:-${NET_MAX:-64M}}" -f 8 --vs-nccl --json "$r/net/allreduce-ucx.json" ;;
    ucx-quick)
      mkdir -p "$r/net"
      step ucx-info bash -c "ucx_info -v 2>/dev/null; ldd $B/src/libgnio.so | grep -i uc"
      for net in ucx tcp; do
        step "$net-rma-suite" env GNIO_NET=$net GNIO_PROXY_STATS=1 GNIO_HEAP_SIZE=64M \
          GNIO_TIMEOUT=60 timeout 300 "$R" -n 2 --nodes 2 --timeout 280 -- \
          "$B/tests/rma/rma_test_2_gpu" "$rma_net_filter"
      done
      step ucx-coll-all env GNIO_NET=ucx GNIO_TIMEOUT=60 "$R" -n 2 --nodes 2 --timeout 300 -- \
        "$P" coll --coll all -b 8 -e 4M -f 8 -n 5 -w 1 --reps 1 --json "$r/net/coll-all-ucx.json"
      for net in ucx tcp; do
        step "$net-rma-lat" env GNIO_NET=$net "$R" -n 2 --nodes 2 --timeout 200 -- "$P" rma \
          --op put,put_signal --scope block --mode lat -b 8 -e 64K -f 8 --reps 3 \
          --json "$r/net/rma-lat-$net.json"
      done ;;
    ucx-staged)
      mkdir -p "$r/net"
      step ucx-info bash -c "ucx_info -v 2>/dev/null; ldd $B/src/libgnio.so | grep -E 'libuc[pts]'"
      if [ -x "$B/tests/rma/rma_test_2_gpu" ]; then
        for net in ucx tcp; do
          step "$net-rma-suite" env GNIO_NET=$net GNIO_PROXY_STATS=1 GNIO_HEAP_SIZE=64M \
            GNIO_TIMEOUT=60 GNIO_DEBUG=INFO timeout 300 "$R" -n 2 --nodes 2 --timeout 280 -- \
            "$B/tests/rma/rma_test_2_gpu" "$rma_net_filter"
        done
      fi
      # The collective suite (the nvcc-compiled binary when built, else the host-compiled one,
      # which runs on the cuda backend here too): every collective through the proxies' pipes.
      # (The host-compiled one cannot launch the device-API tests' kernels: CollDevice.* left out.)
      local coll_bin=$B/tests/coll/coll_test_2_gpu coll_skip='*Soak*'
      [ -x "$coll_bin" ] || { coll_bin=$B/tests/coll/coll_test_2; coll_skip='*Soak*:CollDevice.*'; }
      if [ -x "$coll_bin" ]; then
        step ucx-coll-suite env GNIO_NET=ucx GNIO_BACKEND=cuda GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 \
          GNIO_DEBUG=INFO timeout 400 "$R" -n 2 --nodes 2 --timeout 380 -- "$coll_bin" \
          --gtest_filter="-$coll_skip"
      fi
      if "$P" coll --help >/dev/null 2>&1; then
        step ucx-coll-all env GNIO_NET=ucx GNIO_TIMEOUT=60 "$R" -n 2 --nodes 2 --timeout 300 -- \
          "$P" coll --coll all -b 8 -e 4M -f 8 -n 5 -w 1 --reps 1 --json "$r/net/coll-all-ucx.json"
      fi
      [ "${STAGED_PERF:-1}" = 1 ] || return 0
      for net in ucx tcp; do
        step "$net-rma-lat" env GNIO_NET=$net GNIO_TIMEOUT=60 "$R" -n 2 --nodes 2 --timeout 200 -- \
          "$P" rma --op all --scope block --mode lat -b 8 -e 64K -f 8 --reps 3 \
          --json "$r/net/rma-lat-$net.json"
        step "$net-put-bw" env GNIO_NET=$net GNIO_TIMEOUT=60 "$R" -n 2 --nodes 2 --timeout 200 -- \
          "$P" rma --op put,get --scope block --mode bw -b 1M -e 64M -f 8 --reps 3 \
          --json "$r/net/rma-bw-$net.json"
      done ;;
    hier)
      # The hierarchical allreduce and allgather on 4 ranks as 2 nodes (2 ranks per node, 2 per
      # GPU when one GPU is lent): gnio-perf's exact checks with every call hierarchical and with
      # none, graphs and eager, heap and private buffers; then the allreduce and allgather tests of
      # the collective suite when that binary was built. HIER_S bounds each run (default 150 s),
      # HIER_MAX the sizes (16M).
      mkdir -p "$r/hier"
      local hs=${HIER_S:-150}
      for mode in on off; do
        for mem in sym priv; do
          step "hier-$mode-$mem" env GNIO_COLL_HIER=$mode GNIO_NET=tcp GNIO_TIMEOUT=60 \
            timeout "$hs" "$R" -n 4 --nodes 2 --timeout $((hs - 10)) -- "$P" coll \
            --coll allreduce,allgather -d f32,bf16,i32 -o sum,max -b 8 -e "${HIER_MAX:-16M}" -f 8 \
            -n 5 -w 1 --reps 3 --mem $mem -G "$([ $mem = sym ] && echo 5 || echo 0)" \
            --json "$r/hier/$mode-$mem.json"
        done
      done
      # The suite's binary compiled with nvcc (coll_test_2_gpu) has the CUDA graph test; the
      # host-compiled one (coll_test_2) runs the rest on the cuda backend too.
      local hier_bin=$B/tests/coll/coll_test_2_gpu
      [ -x "$hier_bin" ] || hier_bin=$B/tests/coll/coll_test_2
      if [ -x "$hier_bin" ]; then
        step hier-tests env GNIO_BACKEND=cuda GNIO_COLL_HIER=on GNIO_NET=tcp GNIO_NET_NSOCKS=3 \
          GNIO_HEAP_SIZE=64M GNIO_TIMEOUT=60 timeout "$hs" "$R" -n 4 --nodes 2 \
          --timeout $((hs - 10)) -- "$hier_bin" \
          --gtest_filter='Coll.AllReduceAroundNodeSize:Coll.AllGatherAcrossEqualNodes:Coll.LargeMessages:CollGraph.*'
      fi ;;
    crash-4x2)
      # The RMA barrier tests on 4 ranks as 2 nodes (2 per GPU); a crashing rank prints its stack
      # (tests/common/crash_trace.cpp), resolved here into functions and lines.
      step crash-4x2 timeout 150 "$R" -n 4 --nodes 2 --timeout 120 -- "$B/tests/rma/rma_test_2_gpu" \
        --gtest_filter='Rma.Barrier*'
      for bin in "$B/tests/rma/rma_test_2_gpu" "$B/src/libgnio.so"; do
        grep -o "$(basename "$bin")[.0-9]*(+0x[0-9a-f]*)" "$r/crash-4x2.log" |
          sed 's/.*(+\(0x[0-9a-f]*\))/\1/' | head -40 | xargs -r addr2line -f -C -i -e "$bin"
      done >"$r/crash-4x2-trace.txt" 2>&1 ;;
    soak-long)
      for n in ${SOAK_RANKS:-2 4}; do
        step "soak-long-$n" env GNIO_SOAK_RMA_OPS=100000 GNIO_SOAK_COLLS=10000 GNIO_HEAP_SIZE=64M \
          GNIO_TIMEOUT=60 GNIO_BACKEND=cuda timeout "${SOAK_S:-240}" \
          "$R" -n $n -- "$B/tests/soak/soak_test_2_gpu"
      done ;;
    sanitize)
      step sanitize compute-sanitizer --tool memcheck --target-processes all --error-exitcode 86 \
        ctest --test-dir "$B" -L gpu -LE gpu_fault --output-on-failure -R "$sanitize_tests" ;;
    racecheck)
      for tool in racecheck synccheck; do
        step "$tool" compute-sanitizer --tool "$tool" --target-processes all --error-exitcode 86 \
          ctest --test-dir "$B" -L gpu -LE gpu_fault --output-on-failure \
          -R '^(rma_test_2_gpu|coll_types_test_gpu)$'
      done ;;
    sanitize-coll)
      for tool in memcheck racecheck synccheck; do
        step "coll-$tool" timeout "${SANITIZE_COLL_S:-180}" compute-sanitizer --tool "$tool" \
          --target-processes all --error-exitcode 86 ctest --test-dir "$B" -L gpu -LE gpu_fault \
          --output-on-failure -R '^(coll_test_2_gpu|coll_algo_.*_gpu)$'
      done ;;
    sanitize-all)
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
        # compute-sanitizer cannot check MPS clients: gpu_concurrent tests run without MPS here.
        step "all-$tool" env GNIO_TEST_NO_MPS=1 timeout "${SANITIZE_ALL_S:-400}" compute-sanitizer --tool "$tool" \
          --target-processes all --error-exitcode 86 ctest --test-dir "$B" -L gpu \
          -LE 'gpu_fault|liveness' --output-on-failure
      done ;;
    build-time)
      # From scratch, timed: the library and gnio-perf (the issue's first figure), then every
      # other target, the GPU tests' nvcc builds included (RelWithDebInfo, sm_90, all cores).
      {
        echo "date: $(date -u +%FT%TZ)  host: $(hostname)  cores: $(nproc)"
        echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
        nvidia-smi; nvcc --version
      } >"$r/gpu-info.log" 2>&1
      rm -rf "$B"
      local t0=$SECONDS
      step time-configure cmake -S "$root" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DGNIO_CUDA=ON -DGNIO_GPU_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${CMAKE_EXTRA:-}
      local t1=$SECONDS
      step time-lib-perf cmake --build "$B" --parallel "$jobs" --target gnio gnio-perf
      local t2=$SECONDS
      step time-rest cmake --build "$B" --parallel "$jobs" -- -k 0
      local t3=$SECONDS
      {
        printf 'configure %ds; gnio + gnio-perf %ds; every other target %ds; all from scratch %ds (%d cores)\n' \
          $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t3 - t0)) "$jobs"
        ls -l "$B"/src/libgnio.so.*.*.*
        size -A "$B"/src/libgnio.so.*.*.* | grep -E 'nv_fatbin|Total'
        awk 'NR>1 {printf "%8.1f s  %s\n", ($2-$1)/1000, $4}' "$B/.ninja_log" | sort -rn | head -25
      } >"$r/build-time.txt" 2>&1
      cat "$r/build-time.txt" ;;
    vs-old)
      # This build against an older one's libgnio.so.0 + gnio-perf (OLD_DIR, default .old; carried
      # stripped binaries), VS_OLD_RUNS (default 5) runs each, interleaved, 2 ranks under MPS (both
      # ranks' kernels run at once on one GPU): the stream collectives in CUDA graphs and the
      # in-kernel allreduce (VS_OLD_RMA=1: and the RMA latency table). bench/compare-builds.py makes
      # the table (median over runs).
      mkdir -p "$r/vs-old"
      mps_start
      for i in $(seq 1 "${VS_OLD_RUNS:-5}"); do
        for b in old new; do
          local perf env_lib=()
          use_build "$b"
          step "vs-old-coll-$b-$i" env "${env_lib[@]}" timeout 300 "$R" -n 2 -- "$perf" coll \
            --coll "${VS_OLD_COLLS:-allreduce,allgather,reduce_scatter}" -b "${VS_OLD_MIN:-8}" \
            -e "${VS_OLD_MAX:-64M}" -f "${VS_OLD_F:-4}" -d f32 -o sum --inplace 0 -G "${VS_OLD_G:-20}" \
            ${VS_OLD_REPS:+--reps "$VS_OLD_REPS"} ${VS_OLD_ITERS:+-n "$VS_OLD_ITERS"} \
            --json "$r/vs-old/coll-$b-$i.json"
          # From 8 B in steps of 4 the sweep ends at 32 MiB; the top size runs on its own.
          [ -n "${VS_OLD_TOP-64M}" ] &&
            step "vs-old-top-$b-$i" env "${env_lib[@]}" timeout 300 "$R" -n 2 -- "$perf" coll \
            --coll "${VS_OLD_COLLS:-allreduce,allgather,reduce_scatter}" -b "${VS_OLD_TOP-64M}" \
            -e "${VS_OLD_TOP-64M}" -d f32 -o sum --inplace 0 -G "${VS_OLD_G:-20}" \
            ${VS_OLD_REPS:+--reps "$VS_OLD_REPS"} ${VS_OLD_ITERS:+-n "$VS_OLD_ITERS"} \
            --json "$r/vs-old/top-$b-$i.json"
          [ "${VS_OLD_KERNEL:-1}" = 1 ] &&
            step "vs-old-kernel-$b-$i" env "${env_lib[@]}" timeout 120 "$R" -n 2 -- "$perf" \
            coll-kernel -b 8 -e 64K --json "$r/vs-old/kernel-$b-$i.json"
          [ "${VS_OLD_RMA:-0}" = 1 ] &&
            step "vs-old-rma-$b-$i" env "${env_lib[@]}" timeout 120 "$R" -n 2 -- "$perf" rma \
              --mode lat -b 8 -e 64K -f 8 --json "$r/vs-old/rma-$b-$i.json"
          [ "${VS_OLD_NET:-0}" = 1 ] && mkdir -p "$r/vs-old/net" &&
            step "vs-old-net-$b-$i" env "${env_lib[@]}" GNIO_NET=tcp timeout 120 "$R" -n 2 \
              --nodes 2 -- "$perf" rma --mode lat -b 8 -e 4K -f 8 --json "$r/vs-old/net/rma-$b-$i.json"
        done
      done
      mps_stop
      step vs-old-table python3 bench/compare-builds.py --old "$r/vs-old/*-old-*.json" \
        --new "$r/vs-old/*-new-*.json" --markdown "$r/vs-old/compare.md" \
        --title "new build vs old build, 2 ranks on one GPU under MPS"
      tail -8 "$r/vs-old-table.log"
      if [ "${VS_OLD_NET:-0}" = 1 ]; then
        step vs-old-net-table python3 bench/compare-builds.py --old "$r/vs-old/net/*-old-*.json" \
          --new "$r/vs-old/net/*-new-*.json" --markdown "$r/vs-old/net/compare.md" \
          --title "new build vs old build, RMA through the tcp proxy (2 ranks as 2 nodes, MPS)"
        tail -8 "$r/vs-old-net-table.log"
      fi ;;
    rate-vs-old)
      # The proxy's 8-byte message rates through tcp (2 ranks as 2 nodes, MPS), this build beside
      # OLD_DIR's (as vs-old), interleaved: RATE_RUNS (2) runs of RATE_OPS (signal put) in the
      # shapes RATE_SHAPES ("grid block ops-per-thread" triples; default 8x128 threads x 20 and
      # one warp x 640: every signal on one word).
      local i b op g bl n
      mkdir -p "$r/rate-vs-old"
      mps_start
      for i in $(seq 1 "${RATE_RUNS:-2}"); do
        for b in old new; do
          local perf env_lib=()
          use_build "$b"
          for op in ${RATE_OPS:-signal put}; do
            while read -r g bl n; do
              step "rate-$b-$op-g$g-$i" env "${env_lib[@]}" GNIO_NET=tcp timeout 120 "$R" -n 2 \
                --nodes 2 -- "$perf" msgrate --op "$op" --grid "$g" --block "$bl" -n "$n" --reps 3 \
                --json "$r/rate-vs-old/$b-$op-g$g-$i.json"
            done <<<"${RATE_SHAPES:-$'8 128 20\n1 32 640'}"
          done
        done
      done
      mps_stop
      for f in "$r"/rate-*.log; do
        printf '%-28s %s\n' "$(basename "$f" .log)" "$(grep -E '^\[0\] +(signal|put)' "$f" | head -1)"
      done ;;
    net-ab)
      # Two settings side by side through the tcp proxy (2 ranks as 2 nodes, one MPS daemon):
      # the RMA latency table (8 B..4 KiB) and the 8-byte put, put_signal and signal rates under
      # NET_AB_A and NET_AB_B (space-separated VAR=value; default the delivery agent off and on),
      # NET_AB_RUNS (3) interleaved runs; r/NET_AB_NAME/compare.md with A as "old", B as "new".
      local ab=$r/${NET_AB_NAME:-net-ab}
      mkdir -p "$ab"
      mps_start
      for i in $(seq 1 "${NET_AB_RUNS:-3}"); do
        for side in a b; do
          local vars=${NET_AB_A:-GNIO_PROXY_AGENT=0}
          [ "$side" = b ] && vars=${NET_AB_B:-GNIO_PROXY_AGENT=1}
          # shellcheck disable=SC2086  # VAR=value words
          step "${NET_AB_NAME:-net-ab}-rma-$side-$i" env $vars GNIO_NET=tcp timeout 120 "$R" -n 2 \
            --nodes 2 -- "$P" rma --mode lat -b 8 -e 4K -f 8 --json "$ab/rma-$side-$i.json"
          for op in put put_signal signal; do
            # shellcheck disable=SC2086
            step "${NET_AB_NAME:-net-ab}-$op-$side-$i" env $vars GNIO_NET=tcp timeout 90 "$R" -n 2 \
              --nodes 2 -- "$P" msgrate --op "$op" --grid 8 --block 128 -n 20 --reps 3 \
              --json "$ab/rate-$op-$side-$i.json"
          done
        done
      done
      mps_stop
      step "${NET_AB_NAME:-net-ab}-table" python3 bench/compare-builds.py --old "$ab/*-a-*.json" \
        --new "$ab/*-b-*.json" --markdown "$ab/compare.md" \
        --title "through the tcp proxy, ${NET_AB_A:-GNIO_PROXY_AGENT=0} (old) vs ${NET_AB_B:-GNIO_PROXY_AGENT=1} (new)"
      tail -6 "$r/${NET_AB_NAME:-net-ab}-table.log" ;;
    delivery)
      # What handing a received signal to the GPU costs (perf/probes/delivery_probe.cu): plainly,
      # then as a client of an MPS daemon, as the ranks of a one-GPU job are.
      step delivery-plain timeout 120 "$B/perf/probes/gnio-delivery-probe" "${DELIVERY_ITERS:-2000}"
      cat "$r/delivery-plain.log"
      mps_start
      step delivery-mps timeout 120 "$B/perf/probes/gnio-delivery-probe" "${DELIVERY_ITERS:-2000}"
      mps_stop
      cat "$r/delivery-mps.log" ;;
    msg)
      # Two-sided messages beside put_signal / put, 2 ranks on the GPU(s), each run under its own
      # MPS daemon (one GPU: both kernels at once): p2p up to MSG_MAX (64M), through the proxy
      # (2 nodes, tcp) up to MSG_NET_MAX (4M).
      mkdir -p "$r/msg"
      mps_start
      step msg-p2p timeout 300 "$R" -n 2 -- "$P" msg -e "${MSG_MAX:-64M}" --json "$r/msg/msg-p2p.json"
      # Latency 8 B..64 KiB with low-latency packets off, and up to 64 KiB, same daemon.
      step msg-p2p-ll0 timeout 120 "$R" -n 2 -- "$P" msg --mode lat -b 8 -e 64K -f 2 --ll-max 0 \
        --json "$r/msg/msg-p2p-ll0.json"
      step msg-p2p-ll64k timeout 120 "$R" -n 2 -- "$P" msg --mode lat -b 8 -e 64K -f 2 \
        --ll-max 64K --json "$r/msg/msg-p2p-ll64k.json"
      mps_stop
      mps_start
      step msg-proxy env GNIO_NET=tcp timeout 300 "$R" -n 2 --nodes 2 -- "$P" msg \
        -e "${MSG_NET_MAX:-4M}" --json "$r/msg/msg-proxy.json"
      mps_stop
      grep -h -E "^\[0\] +(lat|bw|rate|#)" "$r/msg-p2p.log" "$r/msg-p2p-ll0.log" \
        "$r/msg-p2p-ll64k.log" "$r/msg-proxy.log" ;;
    msg-sweep)
      # Message latency 8 B..64 KiB at each depth of MSG_DEPTHS (default "1 4 64"; 4 KiB slots),
      # and bandwidth 1..64 MiB with slots of each size in MSG_SLOTS (default "1M 4M", depth 4),
      # beside put_signal / put in the same runs; p2p, one MPS daemon for all.
      mkdir -p "$r/msg-sweep"
      mps_start
      local d sl
      for d in ${MSG_DEPTHS:-1 4 64}; do
        step "msg-lat-depth$d" timeout 120 "$R" -n 2 -- "$P" msg --mode lat -b 8 -e 64K -f 8 \
          --depth "$d" --slot 4K --json "$r/msg-sweep/lat-depth$d.json"
      done
      for sl in ${MSG_SLOTS:-1M 4M}; do
        step "msg-bw-slot$sl" timeout 180 "$R" -n 2 -- "$P" msg --mode bw -b 1M -e 64M -f 4 \
          --depth 4 --slot "$sl" --json "$r/msg-sweep/bw-slot$sl.json"
      done
      mps_stop
      grep -h -E "^\[0\] +(lat|bw|#)" "$r"/msg-lat-depth*.log "$r"/msg-bw-slot*.log ;;
    mpirun)
      # A plain mpirun (no MASTER_ADDR, no GNIO_BOOTSTRAP_*): the one-host rendezvous.
      local x=()
      [ "$(id -u)" = 0 ] && x+=(--allow-run-as-root)
      step mpirun-info env -u MASTER_ADDR -u MASTER_PORT timeout 60 mpirun "${x[@]}" -np 2 \
        "$B/tools/gnio-info/gnio-info" --json
      step mpirun-ping env -u MASTER_ADDR -u MASTER_PORT timeout 60 mpirun "${x[@]}" -np 2 \
        "$B/examples/ping_pong/ping_pong" 1000
      local no_nccl=()  # on one GPU gnio's creation is timed alone
      [ "$gpu_count" -lt 2 ] && no_nccl=(--no-nccl)
      step mpirun-create-time env -u MASTER_ADDR -u MASTER_PORT timeout 60 mpirun "${x[@]}" -np 2 \
        "$B/perf/init/init_bench" 5 "${no_nccl[@]}"
      step gnio-run-create-time "$R" -n 2 -- "$B/perf/init/init_bench" 5 "${no_nccl[@]}" ;;
    python)
      # The Python package from the build tree (configure with CMAKE_EXTRA=-DGNIO_PYTHON=ON; the
      # image's python3 holds torch and nanobind): assembled as `pip install .` lays it out, then
      # the torch tests, both torch examples and the call overhead, 2 ranks under MPS.
      local pkg=$B/pypkg/gnio
      rm -rf "$B/pypkg" && mkdir -p "$pkg/include/gnio" "$pkg/bin" && cp -r python/gnio/. "$pkg/" &&
        cp "$B"/python/_gnio*.so "$pkg/" && ln -s "$B/src" "$pkg/lib" &&
        cp -r include/gnio/. "$pkg/include/gnio/" && cp "$B/include/gnio/version.hpp" "$pkg/include/gnio/" &&
        ln -s "$R" "$pkg/bin/gnio-run" || { echo "python: no _gnio module in $B (CMAKE_EXTRA=-DGNIO_PYTHON=ON)" | tee -a "$r/steps.txt"; return 1; }
      export PYTHONPATH=$B/pypkg${PYTHONPATH:+:$PYTHONPATH}
      local tr=(timeout 300 python3 -m torch.distributed.run --nproc-per-node 2)
      mkdir -p "$r/python"
      mps_start
      step py-tests timeout 300 "$R" -n 2 -- python3 -m pytest -q -p no:cacheprovider \
        python/tests/test_torch.py python/tests/test_gnio.py
      step py-example "${tr[@]}" examples/python/torch_allreduce.py
      [ "${PY_EXTENSION:-1}" = 1 ] &&
        step py-extension env TORCH_EXTENSIONS_DIR="$B/torch-ext" TORCH_CUDA_ARCH_LIST=9.0 \
          "${tr[@]}" examples/python/torch_extension/ring_shift.py
      local k
      for k in 1 2 3; do
        step "py-overhead-py-$k" "${tr[@]}" perf/python/coll_overhead.py \
          --json "$r/python/py-$k.json"
        step "py-overhead-cpp-$k" "$R" -n 2 -- "$P" coll --coll allreduce -d f32 -o sum -b 8 \
          -e 64K -f 4 -G 0 -n 200 -w 20 --reps 15 --inplace 0 --json "$r/python/cpp-$k.json"
      done
      mps_stop
      python3 bench/compare-python-overhead.py --python "$r/python/py-*.json" \
        --cpp "$r/python/cpp-*.json" >"$r/python/overhead.md" 2>&1
      cat "$r/python/overhead.md" ;;
    dropin)
      # PyTorch's ProcessGroupNCCL on libgnio_nccl.so (LD_PRELOAD), 2 ranks on the GPU under MPS
      # (NCCL itself refuses two ranks on one GPU), and the drop-in's per-call overhead.
      local lib=$B/nccl/libgnio_nccl.so
      mps_start
      step dropin-torch env LD_PRELOAD="$lib" timeout 300 python3 -m torch.distributed.run \
        --nproc-per-node 2 tests/nccl/torch_dropin_test.py
      step dropin-overhead "$R" -n 2 -- "$B/perf/nccl_dropin/nccl_dropin_overhead" 21 200
      mps_stop ;;
    *) echo "session-run.sh: unknown step '$1'" >&2; return 2 ;;
  esac
}

[ $# -gt 0 ] || set -- build suite examples init coll rma probe quick coll-kernel msgrate soak-long sanitize \
  racecheck sanitize-coll
for s in "$@"; do run_step "$s"; done
echo "== steps =="
cat "$r/steps.txt"
