// Host collectives: argument checks, the per-communicator channel state, algorithm choice,
// chunking and staging, and the launch of the kernels in coll_kernels.hpp. Their settings are in
// coll_config.hpp, a call's description in coll_request.hpp, GNIO_CHECK's cross-rank comparison
// in coll_check.hpp.
#include "gnio/coll.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/fail.hpp"
#include "coll/coll_check.hpp"
#include "coll/coll_config.hpp"
#include "coll/coll_kernels.hpp"
#include "coll/coll_request.hpp"
#include "coll/gpu_share.hpp"
#include "core/comm_services.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"
#include "platform/backend.hpp"

namespace gnio {

namespace {
constexpr const char* kKindNames[kCollKindCount] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall", "alltoallv"};
constexpr const char* kAlgoNames[kCollAlgoCount] = {"auto", "ll", "oneshot", "twoshot", "ring"};
}  // namespace

const char* to_string(DataType t) noexcept {
  switch (t) {
    case DataType::F32: return "f32";
    case DataType::F16: return "f16";
    case DataType::BF16: return "bf16";
    case DataType::F64: return "f64";
    case DataType::I32: return "i32";
    case DataType::I64: return "i64";
    case DataType::U8: return "u8";
    case DataType::F8E4M3: return "f8e4m3";
    case DataType::F8E5M2: return "f8e5m2";
  }
  return "?";
}

const char* to_string(RedOp op) noexcept {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Min: return "min";
    case RedOp::Max: return "max";
    case RedOp::BitAnd: return "and";
    case RedOp::BitOr: return "or";
    case RedOp::BitXor: return "xor";
  }
  return "?";
}

const char* to_string(CollAlgo a) noexcept {
  const int i = static_cast<int>(a);
  return i >= 0 && i < kCollAlgoCount ? kAlgoNames[i] : "?";
}

const char* to_string(CollKind k) noexcept {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kCollKindCount ? kKindNames[i] : "?";
}

namespace detail {
namespace {

/// Slot sizes of a channel (the same on every rank: config and node size only).
struct Geometry {
  std::uint64_t ll_slot = 0;
  std::uint64_t pipe_chunk = 0;
};

/// How a channel divides its scratch (GNIO_COLL_SCRATCH): half into LL packet slots, one per
/// rank of the largest node (`node_slots`: LL runs between ranks of one node only), and half
/// into pipe sub-slots, one set per rank of the job (`slots`): the landing regions of the pipes
/// to other nodes hold one per rank of the job, so their chunk follows the job's size and the
/// pipes through peer memory use the same chunk.
Geometry geometry(const CollConfig& c, std::size_t slots, std::size_t node_slots) {
  Geometry g;
  const std::size_t ll_area = c.scratch / 2, pipe_area = c.scratch - ll_area;
  g.ll_slot = std::max<std::uint64_t>(
      kLLUnitBytes, (ll_area / (2 * node_slots)) & ~std::uint64_t{kLLUnitBytes - 1});
  g.pipe_chunk = std::max<std::uint64_t>(
      kUnit, (pipe_area / (slots * kCollPipeBlocks * c.depth)) & ~std::uint64_t{kUnit - 1});
  return g;
}

/// The teams of the hierarchical collectives (see run_hierarchical_*): this rank's node and its
/// counterparts, the ranks with its index on every node, in node order.
struct Hierarchy {
  bool usable = false;  ///< at least 2 nodes, each with the same number (>= 2) of ranks
  Team node;
  Team across;
};

/// True when each node's ranks are consecutive: rank i of node m is rank m * L + i (nodes are
/// numbered in the order of their first ranks; gnio-run --nodes and launchers that fill nodes in
/// turn place them so). The hierarchical allgather needs it: its parts between the nodes write
/// their blocks straight into place, L blocks apart (through the pipes, where no peer touches this
/// rank's buffers), and its parts inside a node a consecutive run of the output, laid out as any
/// allgather's. Ranks dealt round-robin over the nodes would make the node parts strided pushes,
/// which the direct algorithms address by each member's published stride but no GPU has run yet:
/// those jobs stay flat.
bool ranks_consecutive(const std::vector<std::vector<int>>& by_node) {
  if (by_node.empty()) return false;
  const std::size_t per_node = by_node.front().size();
  for (std::size_t m = 0; m < by_node.size(); ++m)
    for (std::size_t i = 0; i < per_node; ++i)
      if (by_node[m][i] != static_cast<int>(m * per_node + i)) return false;
  return true;
}

/// Ranks on the job's largest node.
std::size_t largest_node(const CommServices& core) {
  std::vector<std::size_t> on_node(static_cast<std::size_t>(core.nodes()), 0);
  for (int node : core.node_of_rank()) ++on_node[static_cast<std::size_t>(node)];
  return *std::max_element(on_node.begin(), on_node.end());
}

/// The world ranks of every node, ascending, when the job has a hierarchy (at least 2 nodes, each
/// with the same number, at least 2, of ranks); empty otherwise.
std::vector<std::vector<int>> hierarchy_shape(const CommServices& core) {
  if (core.nodes() < 2) return {};
  std::vector<std::vector<int>> by_node(static_cast<std::size_t>(core.nodes()));
  const std::vector<int>& node_of_rank = core.node_of_rank();
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    by_node[static_cast<std::size_t>(node_of_rank[r])].push_back(static_cast<int>(r));
  for (const std::vector<int>& ranks : by_node)
    if (ranks.size() != by_node.front().size()) return {};
  if (by_node.front().size() < 2) return {};
  return by_node;
}

/// Makes the hierarchy's teams when the job's shape allows one. Collective over all ranks, and
/// independent of the GNIO_COLL_HIER settings, so that ranks whose settings differ still make the
/// same teams (every rank makes every node index's team: team ids and heap offsets stay the same
/// everywhere).
Hierarchy make_hierarchy(const CommServices& core) {
  Hierarchy h;
  const std::vector<std::vector<int>> by_node = hierarchy_shape(core);
  if (by_node.empty()) return h;
  const std::size_t per_node = by_node.front().size();
  std::lock_guard<std::mutex> lock(core.setup_mutex());
  for (std::size_t i = 0; i < per_node; ++i) {
    std::vector<int> members;
    for (const std::vector<int>& ranks : by_node) members.push_back(ranks[i]);
    const Team t = core.make_team(members);
    if (t.contains_me()) h.across = t;
  }
  h.node = core.node_team();
  // The node team lists the node's ranks ascending, as by_node does: member i of this rank's
  // node team and of its counterparts' node teams hold the same block.
  GNIO_ASSERT(h.across.contains_me() && h.node.index == core.local_rank());
  h.usable = true;
  return h;
}

/// How the job's ranks share GPUs: one allgather of every rank's GPU identity (collective over all
/// ranks; host-backend ranks have none).
GpuShare gpu_share(const CommServices& core) {
  std::vector<platform::GpuIdentity> ids(static_cast<std::size_t>(core.size()));
  if (core.backend_kind() == Backend::Cuda)
    ids[static_cast<std::size_t>(core.rank())] =
        platform::cuda_device_identity(core.backend().device());
  {
    std::lock_guard<std::mutex> lock(core.setup_mutex());
    core.allgather(ids.data(), sizeof(platform::GpuIdentity));
  }
  const GpuShare share = share_of(ids);
  if (share.ranks > 1)
    GNIO_INFO(
        Coll,
        "up to %u ranks share one GPU: each collective kernel's blocks are capped so that all "
        "of theirs stay resident together (%u SMs per GPU)",
        share.ranks, share.sm_count);
  return share;
}

struct Channel {
  std::uintptr_t key = 0;
  bool host = false;
  CollChannel dev;
};

class CollState {
 public:
  explicit CollState(const CommServices& core) : CollState(core, hierarchy_shape(core)) {}
  CollState(const CommServices& core, const std::vector<std::vector<int>>& by_node)
      : cfg(read_config()),
        check(config_bool("GNIO_CHECK")),
        hier_ranks_per_node(by_node.empty() ? 0 : core.ranks_on_node()),
        hier_consecutive(ranks_consecutive(by_node)),
        ranks(core.node_of_rank().size()),
        algos(parse_algorithms(config_text("GNIO_ALGO"), "GNIO_ALGO")) {}

  const CollConfig cfg;
  const bool check;  // GNIO_CHECK: compare every call's arguments across ranks first
  // Ranks per node where the job's shape allows the hierarchical allreduce; 0 elsewhere.
  const std::size_t hier_ranks_per_node;
  // That shape with each node's ranks consecutive (the hierarchical allgather's condition).
  const bool hier_consecutive;
  const std::size_t ranks;  // in the world
  std::mutex mu;            // guards algos and channels
  AlgoTable algos;
  std::vector<Channel> channels;
  Hierarchy hier;  // made with the first channel; unchanged after
  GpuShare gpu;    // likewise
  // GNIO_CHECK: held across one call's exchange, so calls from several threads keep their
  // sequence numbers in the order of their bootstrap exchanges.
  std::mutex check_mu;
  std::uint64_t check_seq = 0;  // collectives this rank has called on the communicator
};

CollState& state(const CommServices& core) {
  std::lock_guard<std::mutex> lock(core.setup_mutex());
  std::shared_ptr<void>& slot = core.coll_state();
  if (!slot) slot = std::make_shared<CollState>(core);
  return *static_cast<CollState*>(slot.get());
}

/// Allocates and clears a channel's buffers. Collective over all ranks.
CollChannel create_channel(const CommServices& core, const CollConfig& cfg, std::uint32_t id) {
  std::lock_guard<std::mutex> lock(core.setup_mutex());
  const std::size_t slots = static_cast<std::size_t>(core.size());
  const std::size_t node_slots = largest_node(core);
  const std::size_t blocks = kCollMaxBlocks, pipe_blocks = kCollPipeBlocks;
  const Geometry geo = geometry(cfg, slots, node_slots);
  // Staging also bounds the piece that one oneshot/twoshot kernel moves (the same on every rank):
  // on GPUs 64 MiB pieces keep the per-kernel handshakes under 5 % of a large call (16 MiB pieces
  // cost 20 %, measured on 2 x H200); the host backend keeps shared memory small.
  const std::size_t staging =
      cfg.staging ? cfg.staging : (core.backend_kind() == Backend::Host ? 16u << 20 : 64u << 20);
  CollChannel ch;
  ch.slots = static_cast<std::uint32_t>(slots);
  ch.node_slots = static_cast<std::uint32_t>(node_slots);
  ch.max_blocks = kCollMaxBlocks;
  ch.pipe_blocks = kCollPipeBlocks;
  ch.pipe_depth = cfg.depth;
  ch.ll_slot_bytes = geo.ll_slot;
  ch.pipe_chunk = geo.pipe_chunk;
  ch.stage_bytes = staging;
  ch.id = id;
  // Control words, cleared: epoch [slots], credit [node_slots], done, head, tail, addr (by
  // block and node peer).
  const std::size_t n8 = slots * sizeof(std::uint64_t), l8 = node_slots * sizeof(std::uint64_t);
  const std::size_t at_done = n8 + l8, at_head = at_done + 64, at_tail = at_head + blocks * l8,
                    at_addr = at_tail + blocks * l8;
  const SymPtr<char> ctl = core.alloc_internal(at_addr + kCollAddrWords * blocks * l8);
  ch.epoch = ctl.cast<std::uint64_t>();
  ch.credit = ctl.byte_offset<std::uint64_t>(n8);
  ch.done = ctl.byte_offset<std::uint32_t>(at_done);
  ch.head = ctl.byte_offset<std::uint64_t>(at_head);
  ch.tail = ctl.byte_offset<std::uint64_t>(at_tail);
  ch.addr = ctl.byte_offset<std::uint64_t>(at_addr);
  // LL packets, cleared (a stale flag must never match); pipes and staging need no clearing.
  ch.ll = core.alloc_internal(2 * node_slots * geo.ll_slot);
  ch.pipe = core.alloc_internal(node_slots * pipe_blocks * cfg.depth * geo.pipe_chunk, false);
  if (core.has_network()) {
    // Pipes to other nodes: the same layout as `pipe`, in the proxies' host memory (see
    // CollChannel::land_in); every rank creates its channels in the same order, so the region
    // ids agree.
    const std::size_t messages = slots * pipe_blocks * cfg.depth * geo.pipe_chunk;
    const LandingRegion land = core.add_landing(messages + 2 * pipe_blocks * n8, messages);
    ch.landing = land.id;
    ch.land_in = land.inbox;
    ch.land_out = land.outbox;
    ch.land_flags = messages;
    ch.land_count = core.alloc_internal(2 * pipe_blocks * n8).cast<std::uint64_t>();
  }
  ch.stage_in = core.alloc_internal(staging, false);
  ch.stage_out = core.alloc_internal(staging, false);
  // Every rank's words are clear before any peer can write into them.
  core.barrier();
  GNIO_INFO(Coll,
            "collective channel %u: %zu ranks (%zu on the largest node), LL slot %llu B, pipe %u "
            "x %llu B per peer and block, staging 2 x %zu B",
            id, slots, node_slots, static_cast<unsigned long long>(geo.ll_slot), cfg.depth,
            static_cast<unsigned long long>(geo.pipe_chunk), staging);
  return ch;
}

/// The channel of `stream`, set up (collectively) on first use.
CollChannel channel_for(const CommServices& core, CollState& st, StreamRef stream) {
  const bool host = stream.is_host();
  const std::uintptr_t key = host ? reinterpret_cast<std::uintptr_t>(stream.host())
                                  : reinterpret_cast<std::uintptr_t>(stream.cuda());
  std::lock_guard<std::mutex> lock(st.mu);
  for (const Channel& c : st.channels)
    if (c.key == key && c.host == host) return c.dev;
  const int rank = core.rank();
  GNIO_REQUIRE(
      st.channels.size() < st.cfg.channels,
      "rank %d: this is stream number %zu used for collectives on this communicator, but "
      "GNIO_COLL_CHANNELS allows %u; reuse streams or raise GNIO_COLL_CHANNELS (the same on "
      "every rank)",
      rank, st.channels.size() + 1, st.cfg.channels);
  GNIO_REQUIRE(!coll_stream_capturing(stream),
               "rank %d: the first collective on a stream sets up its channel with the other ranks "
               "and cannot be captured into a CUDA graph; call gnio::coll_prepare(comm, stream) "
               "before capturing",
               rank);
  Channel c;
  c.key = key;
  c.host = host;
  c.dev = create_channel(core, st.cfg, static_cast<std::uint32_t>(st.channels.size()));
  if (st.channels.empty()) {
    st.hier = make_hierarchy(core);
    st.gpu = gpu_share(core);
  }
  st.channels.push_back(c);
  return c.dev;
}

void check_stream(const Comm& comm, StreamRef stream) {
  const bool host_backend = comm.backend() == Backend::Host;
  GNIO_REQUIRE(
      stream.is_host() == host_backend,
      "rank %d: a %s stream was given to a collective on a communicator of the %s backend; "
      "use a gnio::Stream of this communicator",
      comm.rank(), stream.is_host() ? "host-backend" : "CUDA", to_string(comm.backend()));
  if (comm.nodes() > 1 && !CommServices(comm).has_network())
    fail(ErrorClass::Unsupported,
         "rank %d: collectives over %d nodes need the network transport to the other nodes, and "
         "this communicator has none (GNIO_NET=none, or a backend that does not carry it yet: "
         "docs/guide/multi-node.md)",
         comm.rank(), comm.nodes());
}

CollComm make_coll_comm(const Comm& comm, const CollState& st, const CollChannel& ch,
                        const Team& team) {
  CollComm cc;
  cc.dc = comm.device_handle();
  cc.team = team;
  cc.ch = ch;
  cc.ll_max = st.cfg.ll_max;
  cc.oneshot_max = st.cfg.oneshot_max;
  cc.remote_oneshot_max = st.cfg.remote_oneshot_max;
  return cc;
}

/// Checks everything that can be checked before any effect; throws InvalidArgument.
void validate(const Comm& comm, const Request& r) {
  const int n = comm.size(), me = comm.rank();
  const char* what = to_string(r.kind);
  GNIO_REQUIRE(static_cast<unsigned>(r.type) < static_cast<unsigned>(kDataTypeCount),
               "rank %d: %s: data type %d is not a gnio::DataType", me, what,
               static_cast<int>(r.type));
  if (reducing(r.kind)) {
    GNIO_REQUIRE(static_cast<unsigned>(r.op) < static_cast<unsigned>(kRedOpCount),
                 "rank %d: %s: operator %d is not a gnio::RedOp", me, what, static_cast<int>(r.op));
    GNIO_REQUIRE(
        !is_bitwise(r.op) || is_integer(r.type),
        "rank %d: %s: bitwise %s needs an integer type (i32, i64, u8), not %s; nothing was "
        "enqueued",
        me, what, to_string(r.op), to_string(r.type));
  }
  if (r.kind == CollKind::Broadcast || r.kind == CollKind::Reduce)
    GNIO_REQUIRE(r.root >= 0 && r.root < n, "rank %d: %s: root %d is not a rank of [0, %d)", me,
                 what, r.root, n);
  if (const KernelSet set = kernel_set(r.kind, r.type, r.op); !kernel_set_built(set))
    fail(ErrorClass::Unsupported,
         "rank %d: %s: this gnio was built without the '%s' collective kernels "
         "(GNIO_COLL_KERNEL_SETS); nothing was enqueued",
         me, what, to_string(set));
  const std::size_t es = size_of(r.type);
  if (r.kind == CollKind::AllToAllV) {
    GNIO_REQUIRE(n <= kMaxAlltoallvRanks,
                 "rank %d: alltoallv over %d ranks; at most %d are supported", me, n,
                 kMaxAlltoallvRanks);
    static const char* kNames[4] = {"send_counts", "send_displs", "recv_counts", "recv_displs"};
    bool any_send = false, any_recv = false;
    for (int i = 0; i < 4; ++i)
      GNIO_REQUIRE(r.a2av[i].size() == static_cast<std::size_t>(n),
                   "rank %d: alltoallv: %s has %zu entries; it needs one per rank (%d)", me,
                   kNames[i], r.a2av[i].size(), n);
    for (int p = 0; p < n; ++p) {
      const std::size_t sc = r.a2av[0][p], sd = r.a2av[1][p], rc = r.a2av[2][p], rd = r.a2av[3][p];
      GNIO_REQUIRE(sc <= kMaxBytes / es && sd <= kMaxBytes / es && rc <= kMaxBytes / es &&
                       rd <= kMaxBytes / es,
                   "rank %d: alltoallv: counts or displacements for rank %d are too large", me, p);
      any_send |= sc > 0;
      any_recv |= rc > 0;
    }
    GNIO_REQUIRE(!any_send || r.send, "rank %d: alltoallv: send is null but counts are not zero",
                 me);
    GNIO_REQUIRE(!any_recv || r.recv, "rank %d: alltoallv: recv is null but counts are not zero",
                 me);
    GNIO_REQUIRE(!(any_send && any_recv && r.send == r.recv),
                 "rank %d: alltoallv cannot run in place (send == recv)", me);
    return;
  }
  const std::size_t blocks =
      gathered_in(r.kind) || gathered_out(r.kind) ? static_cast<std::size_t>(n) : 1;
  GNIO_REQUIRE(r.count <= kMaxBytes / es / blocks,
               "rank %d: %s: count %zu of %s overflows (at most %zu elements in all)", me, what,
               r.count, to_string(r.type), kMaxBytes / es / blocks);
  if (r.count == 0) return;
  const bool send_needed = !(r.kind == CollKind::Broadcast && me != r.root);
  const bool recv_needed = !(r.kind == CollKind::Reduce && me != r.root);
  GNIO_REQUIRE(!send_needed || r.send, "rank %d: %s: send is null with count %zu", me, what,
               r.count);
  GNIO_REQUIRE(!recv_needed || r.recv, "rank %d: %s: recv is null with count %zu", me, what,
               r.count);
  if (r.kind == CollKind::AllToAll)
    GNIO_REQUIRE(r.send != r.recv, "rank %d: alltoall cannot run in place (send == recv)", me);
}

/// GNIO_CHECK=1: checks this rank's arguments, exchanges what every rank must agree on through
/// the bootstrap, and throws on every rank (before anything is enqueued) when a rank's own checks
/// failed or the ranks disagree. A rank whose own checks failed throws its own error; the others
/// throw InvalidArgument naming it.
void cross_check(const Comm& comm, const CommServices& core, CollState& st, const Request& r,
                 StreamRef stream) {
  std::exception_ptr local;
  try {
    validate(comm, r);
    check_stream(comm, stream);
  } catch (const Error&) {
    local = std::current_exception();
  }
  const int n = comm.size(), me = comm.rank();
  std::lock_guard<std::mutex> lock(st.check_mu);
  CheckRecord rec;
  rec.magic = kCheckMagic;
  rec.seq = ++st.check_seq;
  rec.count = r.count;
  rec.kind = static_cast<std::uint32_t>(r.kind);
  rec.type = static_cast<std::uint32_t>(r.type);
  rec.op = static_cast<std::uint32_t>(reducing(r.kind) ? r.op : RedOp::Sum);
  rec.root = r.kind == CollKind::Broadcast || r.kind == CollKind::Reduce ? r.root : 0;
  rec.valid = local ? 0 : 1;
  std::vector<CheckRecord> all(static_cast<std::size_t>(n));
  all[static_cast<std::size_t>(me)] = rec;
  core.allgather(all.data(), sizeof(CheckRecord));
  // Every rank saw the same records: continue from the same number after a mismatch, so one
  // skipped call is reported once and the calls after it are checked normally.
  for (const CheckRecord& q : all)
    if (q.magic == kCheckMagic) st.check_seq = std::max(st.check_seq, q.seq);
  if (local) std::rethrow_exception(local);
  const std::string call = std::string(to_string(r.kind)) + " #" + std::to_string(rec.seq);
  const std::string problems = compare_records(all);
  if (!problems.empty())
    fail(ErrorClass::InvalidArgument,
         "rank %d: %s: %s; nothing was enqueued on any rank (GNIO_CHECK=1)", me, call.c_str(),
         problems.c_str());
  if (r.kind == CollKind::AllToAllV) check_alltoallv_pairs(core, r, call.c_str());
}

/// The whole call as one set of kernel arguments (before chunking).
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

/// The algorithm of a call: the forced one (GNIO_ALGO, coll_set_algorithm) or Auto's choice. A
/// forced algorithm that needs peer memory (LL, TwoShot; OneShot runs through the pipes there)
/// gives way to Ring on a team that spans nodes (once said in the log): the same setting then
/// works for a job on one node and on several.
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

/// Enqueues a validated call over `team` on channel `ch`.
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

/// Does call `r` run hierarchically (GNIO_COLL_HIER, GNIO_COLL_HIER_MIN)? The same answer on
/// every rank: it depends on the job's shape, the call and the settings only. Allreduce (of at
/// least one element per rank of a node) and allgather (each node's ranks consecutive) do; its size
/// is allreduce's buffer and allgather's output.
bool hierarchical(CollState& st, const Request& r) {
  if (st.cfg.hier == CollConfig::Hier::Off || st.hier_ranks_per_node == 0) return false;
  std::size_t bytes = r.count * size_of(r.type);
  if (r.kind == CollKind::AllReduce) {
    if (r.count < st.hier_ranks_per_node) return false;
  } else if (r.kind == CollKind::AllGather) {
    if (!st.hier_consecutive || r.count == 0) return false;
    bytes *= st.ranks;
  } else {
    return false;
  }
  if (st.cfg.hier == CollConfig::Hier::On) return true;
  CollAlgo forced;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    forced = st.algos.forced[static_cast<int>(r.kind)];
  }
  return forced == CollAlgo::Auto && bytes >= st.cfg.hier_min;
}

/// Allreduce over nodes of L ranks each, with 1/L of the bytes crossing the network: the first
/// L * (count / L) elements are reduce-scattered inside each node over peer memory (this rank's
/// node index i gets block i), block i is allreduced with the ranks of index i on the other nodes
/// (L allreduces of count / L elements between the nodes at the same time, through the proxies),
/// and the blocks are allgathered inside each node; the count % L elements left over run as one
/// flat allreduce. Every part is an ordinary call of its team on the same channel: a channel's
/// per-pair call counters count a part only for the pairs of its team, on both ends, so the parts
/// need no synchronisation beyond their own. Every rank ends with the same bits: each block is
/// reduced once (on one node), combined across nodes by an algorithm whose result is the same on
/// every member, and copied.
void run_hierarchical_allreduce(Comm& comm, CollState& st, const CollChannel& ch, const Request& r,
                                StreamRef stream) {
  const Hierarchy& h = st.hier;
  GNIO_ASSERT(h.usable);
  const std::size_t es = size_of(r.type), per_node = static_cast<std::size_t>(h.node.size);
  const std::size_t block = r.count / per_node, head = block * per_node;
  char* mine = r.recv + block * static_cast<std::size_t>(h.node.index) * es;
  GNIO_TRACE(Coll, "allreduce of %zu x %s hierarchical: %d nodes of %zu ranks, blocks of %zu%s",
             r.count, to_string(r.type), h.across.size, per_node, block,
             head < r.count ? ", the rest flat" : "");
  Request part = r;
  part.kind = CollKind::ReduceScatter;  // in place when send == recv: mine == send + index*block
  part.count = block;
  part.recv = mine;
  enqueue(comm, st, ch, h.node, part, stream);
  part = r;
  part.count = block;
  part.send = mine;
  part.recv = mine;
  enqueue(comm, st, ch, h.across, part, stream);
  part = r;
  part.kind = CollKind::AllGather;  // in place: send == recv + index*block
  part.count = block;
  part.send = mine;
  enqueue(comm, st, ch, h.node, part, stream);
  if (head < r.count) {
    part = r;
    part.count = r.count - head;
    part.send = r.send + head * es;
    part.recv = r.recv + head * es;
    enqueue(comm, st, ch, CommServices(comm).world(), part, stream);
  }
}

/// Allgather over N nodes of L consecutive ranks each, with each block crossing the
/// network once per other node: the ranks of index i on every node allgather their blocks (L
/// allgathers between the nodes at once, through the proxies), each block landing in its place
/// in the output (L blocks apart); then each node allgathers, once per
/// node m, the blocks of node m's ranks its members now hold (a consecutive run of the output,
/// over peer memory). Every part is an ordinary call of its team on the same channel, in place in
/// the output, as run_hierarchical_allreduce's are. A flat ring sends (NL - 1) blocks per rank over
/// the links its ring crosses, this (N - 1) over L pairs of proxies at once.
void run_hierarchical_allgather(Comm& comm, CollState& st, const CollChannel& ch, const Request& r,
                                StreamRef stream) {
  const Hierarchy& h = st.hier;
  GNIO_ASSERT(h.usable && st.hier_consecutive);
  const std::size_t block = r.count * size_of(r.type), per_node = st.hier_ranks_per_node;
  const auto at = [&](std::size_t node, std::size_t index) {
    return r.recv + (node * per_node + index) * block;
  };
  const std::size_t me_index = static_cast<std::size_t>(h.node.index);
  GNIO_TRACE(Coll, "allgather of %zu x %s hierarchical: %d nodes of %d ranks", r.count,
             to_string(r.type), h.across.size, h.node.size);
  Request part = r;
  part.out_stride = per_node * block;
  part.recv = at(0, me_index);
  enqueue(comm, st, ch, h.across, part, stream);
  for (std::size_t m = 0; m < static_cast<std::size_t>(h.across.size); ++m) {
    part = r;
    part.send = at(m, me_index);  // in place: what the first part brought, or this rank's own
    part.recv = at(m, 0);
    enqueue(comm, st, ch, h.node, part, stream);
  }
}

void run(Comm& comm, const Request& r, StreamRef stream) {
  const CommServices core(comm);
  CollState& st = state(core);
  if (st.check) {
    cross_check(comm, core, st, r, stream);
  } else {
    validate(comm, r);
    check_stream(comm, stream);
  }
  if (r.kind != CollKind::AllToAllV && r.count == 0) return;
  const CollChannel ch = channel_for(core, st, stream);
  if (!hierarchical(st, r))
    enqueue(comm, st, ch, core.world(), r, stream);
  else if (r.kind == CollKind::AllReduce)
    run_hierarchical_allreduce(comm, st, ch, r, stream);
  else
    run_hierarchical_allgather(comm, st, ch, r, stream);
}

}  // namespace
}  // namespace detail

// ------------------------------------------------------------------------------------------------

void allreduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllReduce, type, op, send, recv, count), stream);
}

void reduce_scatter(Comm& comm, const void* send, void* recv, std::size_t recvcount, DataType type,
                    RedOp op, StreamRef stream) {
  detail::run(comm, detail::request(CollKind::ReduceScatter, type, op, send, recv, recvcount),
              stream);
}

void allgather(Comm& comm, const void* send, void* recv, std::size_t sendcount, DataType type,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllGather, type, RedOp::Sum, send, recv, sendcount),
              stream);
}

void broadcast(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, int root,
               StreamRef stream) {
  detail::run(comm, detail::request(CollKind::Broadcast, type, RedOp::Sum, send, recv, count, root),
              stream);
}

void reduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
            int root, StreamRef stream) {
  detail::run(comm, detail::request(CollKind::Reduce, type, op, send, recv, count, root), stream);
}

void alltoall(Comm& comm, const void* send, void* recv, std::size_t count, DataType type,
              StreamRef stream) {
  detail::run(comm, detail::request(CollKind::AllToAll, type, RedOp::Sum, send, recv, count),
              stream);
}

void alltoallv(Comm& comm, const void* send, std::span<const std::size_t> send_counts,
               std::span<const std::size_t> send_displs, void* recv,
               std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
               DataType type, StreamRef stream) {
  detail::Request r = detail::request(CollKind::AllToAllV, type, RedOp::Sum, send, recv, 0);
  r.a2av[0] = send_counts;
  r.a2av[1] = send_displs;
  r.a2av[2] = recv_counts;
  r.a2av[3] = recv_displs;
  detail::run(comm, r, stream);
}

void coll_prepare(Comm& comm, StreamRef stream) {
  detail::check_stream(comm, stream);
  const detail::CommServices core(comm);
  (void)detail::channel_for(core, detail::state(core), stream);
}

CollComm coll_comm(Comm& comm, StreamRef stream, const Team& team) {
  detail::check_stream(comm, stream);
  const detail::CommServices core(comm);
  detail::CollState& st = detail::state(core);
  const detail::CollChannel ch = detail::channel_for(core, st, stream);
  return detail::make_coll_comm(comm, st, ch, team);
}

CollComm coll_comm(Comm& comm, StreamRef stream) {
  return coll_comm(comm, stream, comm.world());
}

void coll_set_algorithm(Comm& comm, const std::string& spec) {
  const detail::AlgoTable t = detail::parse_algorithms(spec, "coll_set_algorithm");
  detail::CollState& st = detail::state(detail::CommServices(comm));
  std::lock_guard<std::mutex> lock(st.mu);
  st.algos = t;
}

bool coll_hierarchical(Comm& comm, CollKind kind, std::size_t count, DataType type) {
  detail::Request r;
  r.kind = kind;
  r.type = type;
  r.count = count;
  return detail::hierarchical(detail::state(detail::CommServices(comm)), r);
}

CollAlgo coll_algorithm(Comm& comm, CollKind kind, std::size_t count, DataType type) {
  const detail::CommServices core(comm);
  detail::CollState& st = detail::state(core);
  detail::Request r;
  r.kind = kind;
  r.type = type;
  r.count = count;
  CollComm cc;
  cc.dc = comm.device_handle();
  cc.team = core.world();
  cc.ll_max = st.cfg.ll_max;
  cc.oneshot_max = st.cfg.oneshot_max;
  cc.remote_oneshot_max = st.cfg.remote_oneshot_max;
  cc.ch.ll_slot_bytes =
      detail::geometry(st.cfg, static_cast<std::size_t>(comm.size()), detail::largest_node(core))
          .ll_slot;
  return detail::resolve(st, cc, detail::full_args(comm, r));
}

}  // namespace gnio
