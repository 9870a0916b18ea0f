// One validated host collective call's launches (coll_enqueue.hpp).
#include "coll/coll_enqueue.hpp"

#include <algorithm>
#include <mutex>

#include "coll/coll_kernels.hpp"
#include "gnio/log.hpp"

namespace gnio::detail {

CollArgs full_args(const Comm& comm, const Request& r) {
  const std::size_t es = size_of(r.type);
  CollArgs a;
  a.kind = r.kind;
  a.op = r.op;
  a.in = r.send;
  a.out = r.recv;
  a.bytes = r.count * es;
  a.root = r.root;
  a.elem_size = static_cast<std::uint32_t>(es);
  if (gathered_in(r.kind)) a.in_stride = a.bytes;
  if (gathered_out(r.kind)) a.out_stride = r.out_stride ? r.out_stride : a.bytes;
  (void)comm;
  return a;
}

CollAlgo resolve(CollState& st, const CollComm& cc, const CollArgs& full) {
  CollAlgo a;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    a = st.algos.forced[static_cast<int>(full.kind)];
  }
  if (a == CollAlgo::Auto) return cc.choose(full);
  if (a != CollAlgo::Ring && a != CollAlgo::OneShot && !cc.peer_memory()) {
    static std::once_flag said;
    std::call_once(said, [&] {
      GNIO_WARN(Coll,
                "rank %d: the forced %s algorithm needs every rank on one node; collectives over "
                "ranks on several nodes run ring",
                cc.dc.rank(), to_string(a));
    });
    return CollAlgo::Ring;
  }
  return a;
}

namespace {
/// Blocks and threads of one launch; the same on every rank for the same call.
LaunchDims dims_for(const CollConfig& cfg, bool host, CollAlgo algo, bool pipes, const CollArgs& a,
                    int n, std::uint64_t pipe_chunk) {
  std::size_t work = units_of(a.bytes);
  if (a.kind == CollKind::AllToAllV)
    work = 1u << 16;
  else if (gathered_in(a.kind) || gathered_out(a.kind))
    work *= static_cast<std::size_t>(n);
  LaunchDims d;
  if (host) {
    // CPU threads: few, but two blocks whenever there is work for both (exercises the per-block
    // flags and pipes exactly as on the GPU).
    d.block = cfg.threads ? cfg.threads : 4;
    d.grid = work >= 2 ? 2 : 1;
  } else {
    // Shapes measured on 2 x H200 (bench/tune-coll.sh, bench/results/2026-11-30-h200x2-coll):
    // 256 threads per block until a rank moves 16 MiB, then 1024 (capped by the kernels'
    // registers); LL is fastest with up to 64 blocks, oneshot/twoshot with up to 128 (more
    // blocks than that lose bandwidth again: NVLink queues fill without more bytes in flight).
    d.block = cfg.threads ? cfg.threads : (work * kUnit >= (16u << 20) ? 1024 : 256);
    auto clamp = [](std::size_t v, std::size_t hi) {
      return static_cast<unsigned>(std::max<std::size_t>(1, std::min(v, hi)));
    };
    // Blocks by work (oneshot/twoshot threads move 4 units per iteration).
    constexpr std::size_t kLLBlocks = 64, kDirectBlocks = 128;
    switch (algo) {
      case CollAlgo::LL: d.grid = clamp((work + d.block - 1) / d.block, kLLBlocks); break;
      case CollAlgo::OneShot:
        d.grid = clamp((work + 4 * d.block - 1) / (4 * d.block), kDirectBlocks);
        break;
      case CollAlgo::TwoShot: {
        // Reductions and the n > 2 broadcast work on 1/n of the data per rank; pushes on all of
        // this rank's own data.
        const std::size_t mine =
            twoshot_pushes(a.kind, n) ? units_of(a.bytes) : work / static_cast<std::size_t>(n);
        d.grid = clamp((mine + 4 * d.block - 1) / (4 * d.block), kDirectBlocks);
        break;
      }
      default: {
        const std::size_t seg =
            a.kind == CollKind::AllReduce ? work / static_cast<std::size_t>(n) : units_of(a.bytes);
        d.grid = clamp((seg + pipe_chunk / kUnit - 1) / (pipe_chunk / kUnit), kCollPipeBlocks);
        break;
      }
    }
  }
  if (cfg.blocks) d.grid = cfg.blocks;
  d.grid = std::min(d.grid, pipes ? kCollPipeBlocks : kCollMaxBlocks);
  return d;
}
}  // namespace

void enqueue(Comm& comm, CollState& st, const CollChannel& ch, const Team& team, const Request& r,
             StreamRef stream) {
  const CommServices core(comm);
  const CollComm cc = make_coll_comm(comm, st, ch, team);
  const int n = team.size, me = team.index;
  const bool host = stream.is_host();
  const std::size_t es = size_of(r.type);
  const CollArgs full = full_args(comm, r);
  const CollAlgo algo = resolve(st, cc, full);
  if (core.flight_enabled()) {
    FlightEntry e;
    e.event = FlightEvent::Collective;
    e.what = to_string(r.kind);
    e.type = to_string(r.type);
    e.op = reducing(r.kind) ? to_string(r.op) : nullptr;
    e.algo = to_string(r.kind == CollKind::AllToAllV ? CollAlgo::Ring : algo);
    e.count = r.count;
    e.root = r.kind == CollKind::Broadcast || r.kind == CollKind::Reduce ? r.root : -1;
    e.stream = host ? reinterpret_cast<std::uintptr_t>(stream.host())
                    : reinterpret_cast<std::uintptr_t>(stream.cuda());
    e.channel = static_cast<std::int32_t>(ch.id);
    core.record(e);
  }

  CollLaunch l;
  l.cc = cc;
  l.gpu = st.cfg.blocks ? GpuShare{} : st.gpu;  // GNIO_COLL_BLOCKS is taken as given
  l.stream = stream;
  if (r.kind == CollKind::AllToAllV) {
    std::uint64_t table[4 * kMaxAlltoallvRanks] = {};
    for (int i = 0; i < 4; ++i)
      for (int p = 0; p < n; ++p) table[i * n + p] = r.a2av[i][static_cast<std::size_t>(p)];
    l.args = full;
    l.args.algo = CollAlgo::Ring;
    l.a2av = table;
    l.dims = dims_for(st.cfg, host, CollAlgo::Ring, true, l.args, n, ch.pipe_chunk);
    launch_kernel(kernel_set(r.kind, r.type, r.op), l);
    return;
  }

  // Elements per launch: LL is bounded by its packet slot, OneShot/TwoShot by the staging area
  // (the same bound on every rank, staged or not, so every rank launches the same kernels).
  // Through the pipes (Ring; OneShot across nodes) no peer touches this rank's buffers.
  const bool pipes = cc.through_pipes(algo);
  const bool direct = !pipes && (algo == CollAlgo::OneShot || algo == CollAlgo::TwoShot);
  std::size_t cap = r.count;
  if (algo == CollAlgo::LL) cap = ch.ll_slot_bytes / 2 / es;
  const bool push = algo == CollAlgo::TwoShot && twoshot_pushes(r.kind, n);
  const bool gathered_stage = gathered_in(r.kind) || (push && gathered_out(r.kind));
  if (direct) cap = ch.stage_bytes / es / (gathered_stage ? static_cast<std::size_t>(n) : 1);
  cap = std::max<std::size_t>(cap / (kUnit / es) * (kUnit / es), kUnit / es);  // whole units

  // Which of this rank's buffers peers access (and so must be in the heap, or staged).
  const bool in_shared = direct && !push && !(r.kind == CollKind::Broadcast && me != r.root);
  const bool out_shared =
      algo == CollAlgo::TwoShot && !(r.kind == CollKind::Reduce && me != r.root);
  const std::size_t in_total = full.bytes * (gathered_in(r.kind) ? static_cast<std::size_t>(n) : 1);
  const bool stage_in = in_shared && !core.in_heap(r.send, in_total);
  const std::size_t out_total =
      full.bytes * (gathered_out(r.kind) ? static_cast<std::size_t>(n) : 1);
  const bool stage_out = out_shared && !core.in_heap(r.recv, out_total);
  char* stage_in_ptr = comm.local(ch.stage_in);
  char* stage_out_ptr = comm.local(ch.stage_out);
  GNIO_TRACE(Coll, "%s of %zu x %s (%s) with %s on channel %u%s%s", to_string(r.kind), r.count,
             to_string(r.type), reducing(r.kind) ? to_string(r.op) : "-", to_string(algo), ch.id,
             stage_in ? ", input staged" : "", stage_out ? ", output staged" : "");

  for (std::size_t c0 = 0; c0 < r.count; c0 += cap) {
    const std::size_t c = std::min(cap, r.count - c0);
    CollArgs a = full;
    a.algo = algo;
    a.bytes = c * es;
    a.in = r.send ? r.send + c0 * es : nullptr;
    a.out = r.recv ? r.recv + c0 * es : nullptr;
    if (stage_in) {
      if (gathered_in(r.kind)) {
        for (int m = 0; m < n; ++m)
          comm.copy(stage_in_ptr + static_cast<std::size_t>(m) * a.bytes,
                    a.in + static_cast<std::size_t>(m) * full.in_stride, a.bytes, stream);
        a.in_stride = a.bytes;
      } else {
        comm.copy(stage_in_ptr, a.in, a.bytes, stream);
      }
      a.in = stage_in_ptr;
    }
    char* user_out = a.out;
    if (stage_out) {
      a.out = stage_out_ptr;
      if (gathered_out(r.kind)) a.out_stride = a.bytes;
    }
    l.args = a;
    l.dims = dims_for(st.cfg, host, algo, pipes, a, n, ch.pipe_chunk);
    GNIO_TRACE(Coll, "  piece at element %zu: %zu bytes, %u blocks of %u threads", c0, a.bytes,
               l.dims.grid, l.dims.block);
    launch_kernel(kernel_set(r.kind, r.type, r.op), l);
    if (stage_out) {
      if (gathered_out(r.kind)) {
        for (int m = 0; m < n; ++m)
          comm.copy(user_out + static_cast<std::size_t>(m) * full.out_stride,
                    stage_out_ptr + static_cast<std::size_t>(m) * a.bytes, a.bytes, stream);
      } else {
        comm.copy(user_out, stage_out_ptr, a.bytes, stream);
      }
    }
  }
}

}  // namespace gnio::detail
