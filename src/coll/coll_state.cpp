// A communicator's collective state and its channels (coll_state.hpp).
#include "coll/coll_state.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fail.hpp"
#include "coll/coll_kernels.hpp"
#include "gnio/log.hpp"
#include "platform/backend.hpp"

namespace gnio::detail {

Geometry geometry(const CollConfig& c, std::size_t slots, std::size_t node_slots) {
  Geometry g;
  const std::size_t ll_area = c.scratch / 2, pipe_area = c.scratch - ll_area;
  g.ll_slot = std::max<std::uint64_t>(
      kLLUnitBytes, (ll_area / (2 * node_slots)) & ~std::uint64_t{kLLUnitBytes - 1});
  g.pipe_chunk = std::max<std::uint64_t>(
      kUnit, (pipe_area / (slots * kCollPipeBlocks * c.depth)) & ~std::uint64_t{kUnit - 1});
  return g;
}

std::size_t largest_node(const CommServices& core) {
  std::vector<std::size_t> on_node(static_cast<std::size_t>(core.comm().nodes()), 0);
  for (int node : core.node_of_rank()) ++on_node[static_cast<std::size_t>(node)];
  return *std::max_element(on_node.begin(), on_node.end());
}

GpuShare gpu_share(const CommServices& core) {
  const Comm& comm = core.comm();
  std::vector<platform::GpuIdentity> ids(static_cast<std::size_t>(comm.size()));
  if (comm.backend() == Backend::Cuda)
    ids[static_cast<std::size_t>(comm.rank())] =
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

CollState& state(const CommServices& core) {
  std::lock_guard<std::mutex> lock(core.setup_mutex());
  std::shared_ptr<void>& slot = core.coll_state();
  if (!slot) slot = std::make_shared<CollState>(core);
  return *static_cast<CollState*>(slot.get());
}

/// Allocates and clears a channel's buffers. Collective over all ranks.
namespace {
CollChannel create_channel(const CommServices& core, const CollConfig& cfg, std::uint32_t id) {
  std::lock_guard<std::mutex> lock(core.setup_mutex());
  const std::size_t slots = static_cast<std::size_t>(core.comm().size());
  const std::size_t node_slots = largest_node(core);
  const std::size_t blocks = kCollMaxBlocks, pipe_blocks = kCollPipeBlocks;
  const Geometry geo = geometry(cfg, slots, node_slots);
  // Staging also bounds the piece that one oneshot/twoshot kernel moves (the same on every rank):
  // on GPUs 64 MiB pieces keep the per-kernel handshakes under 5 % of a large call (16 MiB pieces
  // cost 20 %, measured on 2 x H200); the host backend keeps shared memory small.
  const std::size_t staging =
      cfg.staging ? cfg.staging : (core.comm().backend() == Backend::Host ? 16u << 20 : 64u << 20);
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
}  // namespace

CollChannel channel_for(const CommServices& core, CollState& st, StreamRef stream) {
  const bool host = stream.is_host();
  const std::uintptr_t key = host ? reinterpret_cast<std::uintptr_t>(stream.host())
                                  : reinterpret_cast<std::uintptr_t>(stream.cuda());
  std::lock_guard<std::mutex> lock(st.mu);
  for (const Channel& c : st.channels)
    if (c.key == key && c.host == host) return c.dev;
  const int rank = core.comm().rank();
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

}  // namespace gnio::detail
