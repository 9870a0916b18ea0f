// The hierarchical collectives (GNIO_COLL_HIER): the job shapes that allow them, their teams (this
// rank's node and its counterparts on the other nodes), the choice of a call that runs so, and
// the allreduce and allgather made of ordinary calls of those teams.
#pragma once

#include <cstddef>
#include <vector>

#include "coll/coll_request.hpp"
#include "core/comm_services.hpp"
#include "gnio/coll.hpp"

namespace gnio::detail {

class CollState;

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
bool ranks_consecutive(const std::vector<std::vector<int>>& by_node);

/// The world ranks of every node, ascending, when the job has a hierarchy (at least 2 nodes, each
/// with the same number, at least 2, of ranks); empty otherwise.
std::vector<std::vector<int>> hierarchy_shape(const CommServices& core);

/// Makes the hierarchy's teams when the job's shape allows one. Collective over all ranks, and
/// independent of the GNIO_COLL_HIER settings, so that ranks whose settings differ still make the
/// same teams (every rank makes every node index's team: team ids and heap offsets stay the same
/// everywhere).
Hierarchy make_hierarchy(const CommServices& core);

/// Does call `r` run hierarchically (GNIO_COLL_HIER, GNIO_COLL_HIER_MIN)? The same answer on
/// every rank: it depends on the job's shape, the call and the settings only. Allreduce (of at
/// least one element per rank of a node) and allgather (each node's ranks consecutive) do; its size
/// is allreduce's buffer and allgather's output.
bool hierarchical(CollState& st, const Request& r);

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
                                StreamRef stream);

/// Allgather over N nodes of L consecutive ranks each, with each block crossing the
/// network once per other node: the ranks of index i on every node allgather their blocks (L
/// allgathers between the nodes at once, through the proxies), each block landing in its place
/// in the output (L blocks apart); then each node allgathers, once per
/// node m, the blocks of node m's ranks its members now hold (a consecutive run of the output,
/// over peer memory). Every part is an ordinary call of its team on the same channel, in place in
/// the output, as run_hierarchical_allreduce's are. A flat ring sends (NL - 1) blocks per rank over
/// the links its ring crosses, this (N - 1) over L pairs of proxies at once.
void run_hierarchical_allgather(Comm& comm, CollState& st, const CollChannel& ch, const Request& r,
                                StreamRef stream);

}  // namespace gnio::detail
