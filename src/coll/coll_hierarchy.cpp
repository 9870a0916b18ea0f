// The hierarchical collectives' teams and calls (coll_hierarchy.hpp).
#include "coll/coll_hierarchy.hpp"

#include <mutex>
#include <vector>

#include "base/fail.hpp"
#include "coll/coll_enqueue.hpp"
#include "coll/coll_state.hpp"
#include "gnio/log.hpp"

namespace gnio::detail {

bool ranks_consecutive(const std::vector<std::vector<int>>& by_node) {
  if (by_node.empty()) return false;
  const std::size_t per_node = by_node.front().size();
  for (std::size_t m = 0; m < by_node.size(); ++m)
    for (std::size_t i = 0; i < per_node; ++i)
      if (by_node[m][i] != static_cast<int>(m * per_node + i)) return false;
  return true;
}

std::vector<std::vector<int>> hierarchy_shape(const CommServices& core) {
  const int nodes = core.comm().nodes();
  if (nodes < 2) return {};
  std::vector<std::vector<int>> by_node(static_cast<std::size_t>(nodes));
  const std::vector<int>& node_of_rank = core.node_of_rank();
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    by_node[static_cast<std::size_t>(node_of_rank[r])].push_back(static_cast<int>(r));
  for (const std::vector<int>& ranks : by_node)
    if (ranks.size() != by_node.front().size()) return {};
  if (by_node.front().size() < 2) return {};
  return by_node;
}

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
  h.node = core.comm().node_team();
  // The node team lists the node's ranks ascending, as by_node does: member i of this rank's
  // node team and of its counterparts' node teams hold the same block.
  GNIO_ASSERT(h.across.contains_me() && h.node.index == core.comm().local_rank());
  h.usable = true;
  return h;
}

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
    enqueue(comm, st, ch, comm.world(), part, stream);
  }
}

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

}  // namespace gnio::detail
