// The tcp network backend's connections: `lanes` TCP sockets (GNIO_NET_NSOCKS) to every rank on
// another node, established collectively at communicator creation. Every connection opens with a
// hello that carries the job token, both ranks and the lane, so a stray client (port scan,
// another job) is dropped without disturbing the job.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/socket.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio::net {

/// Connected, non-blocking TCP sockets: `lanes()` per remote peer.
class TcpMesh {
 public:
  /// Collective over every rank of `bootstrap` (ranks without remote peers take part too):
  /// listens, exchanges addresses, connects `lanes` sockets to each remote peer of lower rank and
  /// accepts the others', each step bounded by `timeout_s` (0 = no limit). `node_of_rank[r]` is
  /// rank r's node. Throws Error(InvalidArgument) when the ranks ask for different lane counts.
  TcpMesh(Bootstrap& bootstrap, const std::vector<int>& node_of_rank, double timeout_s,
          int lanes = 1);

  /// Socket `lane` to `peer`, or -1 when `peer` is on this rank's node.
  int fd(int peer, int lane = 0) const { return fds_[connection(peer, lane)].get(); }
  /// Sockets per remote peer.
  int lanes() const { return lanes_; }
  /// Ranks on other nodes, ascending.
  const std::vector<int>& peers() const { return peers_; }
  /// Index of socket `lane` to `peer` among connections() (per-connection state is kept in
  /// arrays laid out the same way).
  std::size_t connection(int peer, int lane) const {
    return static_cast<std::size_t>(peer) * static_cast<std::size_t>(lanes_) +
           static_cast<std::size_t>(lane);
  }
  /// Number of (rank, lane) pairs, local ranks included (their sockets are -1).
  std::size_t connections() const { return fds_.size(); }

 private:
  int lanes_ = 1;
  std::vector<bootstrap::Fd> fds_;
  std::vector<int> peers_;
};

}  // namespace gnio::net
