// The tcp network backend's connections: one TCP socket to every rank on another node,
// established collectively at communicator creation. Every connection opens with a hello that
// carries the job token and both ranks, so a stray client (port scan, another job) is dropped
// without disturbing the job. GNIO_NET_NSOCKS (several sockets per peer) comes later.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/socket.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio::net {

/// One connected, non-blocking TCP socket per remote peer.
class TcpMesh {
 public:
  /// Collective over every rank of `bootstrap` (ranks without remote peers take part too):
  /// listens, exchanges addresses, connects to remote peers of lower rank and accepts the others,
  /// each step bounded by `timeout_s` (0 = no limit). `node_of_rank[r]` is rank r's node.
  TcpMesh(Bootstrap& bootstrap, const std::vector<int>& node_of_rank, double timeout_s);

  /// The socket to `peer`, or -1 when `peer` is on this rank's node.
  int fd(int peer) const { return fds_[peer].get(); }
  /// Ranks on other nodes, ascending.
  const std::vector<int>& peers() const { return peers_; }
  /// Closes the connection to `peer` (its side sees end of file).
  void close(int peer) { fds_[peer].reset(); }

 private:
  std::vector<bootstrap::Fd> fds_;
  std::vector<int> peers_;
};

}  // namespace gnio::net
