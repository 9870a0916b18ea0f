// A communicator's collective state (CollState: settings, forced algorithms, channels, the
// hierarchy's teams, GPU sharing, GNIO_CHECK's sequence) and its channels: their slot geometry,
// their collective creation on a stream's first use, and the CollComm handle of one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "coll/coll_config.hpp"
#include "coll/coll_hierarchy.hpp"
#include "coll/gpu_share.hpp"
#include "core/comm_services.hpp"
#include "gnio/coll.hpp"
#include "gnio/config.hpp"

namespace gnio::detail {

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
Geometry geometry(const CollConfig& c, std::size_t slots, std::size_t node_slots);

/// Ranks on the job's largest node.
std::size_t largest_node(const CommServices& core);

/// How the job's ranks share GPUs: one allgather of every rank's GPU identity (collective over all
/// ranks; host-backend ranks have none).
GpuShare gpu_share(const CommServices& core);

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
        hier_ranks_per_node(by_node.empty() ? 0 : by_node.front().size()),
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

CollState& state(const CommServices& core);

/// The channel of `stream`, set up (collectively) on first use.
CollChannel channel_for(const CommServices& core, CollState& st, StreamRef stream);

CollComm make_coll_comm(const Comm& comm, const CollState& st, const CollChannel& ch,
                        const Team& team);

}  // namespace gnio::detail
