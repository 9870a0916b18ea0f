// Node-local exchange of file descriptors (SCM_RIGHTS over Unix sockets), used to share memory
// (memfd, CUDA VMM POSIX handles) between the ranks of one node.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/socket.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio {

/// Passes file descriptors among the ranks of one node.
///
/// Each rank listens on a Unix SOCK_SEQPACKET socket in the abstract namespace named
/// "gnio-fdx-<token>-<world rank>" (no file on disk; two jobs with different tokens never collide;
/// ranks must share a network namespace). On the first allgather_fd() every pair of node ranks
/// connects once (the lower position connects to the higher); each connection starts with a hello
/// carrying the job token and is accepted only from the same user id (SO_PEERCRED). Later calls
/// reuse the connections; every descriptor travels with a sequence number so calls cannot mix.
///
/// Not thread-safe: one allgather_fd() at a time per object (calls are serialized by a mutex).
/// One FdExchange per (token, world rank) may exist on a host at a time.
class FdExchange {
 public:
  /// `node_ranks`: the world ranks on this node, ascending, including bootstrap.rank().
  /// `token`: the job token (usually bootstrap.token()). Creates the listener (not collective).
  /// Throws Error(InvalidArgument) for a bad list, Error(SystemError) when the socket name is
  /// taken (another FdExchange with this token and rank is alive on this host).
  FdExchange(Bootstrap& bootstrap, std::vector<int> node_ranks, std::uint64_t token);
  ~FdExchange();
  FdExchange(const FdExchange&) = delete;
  FdExchange& operator=(const FdExchange&) = delete;

  /// Collective among the node's ranks: sends `my_fd` to every other node rank and returns one
  /// descriptor per node rank, indexed by position in node_ranks(); this rank's own slot is a
  /// dup of `my_fd`. The caller owns (and closes) every returned descriptor; all are
  /// close-on-exec. May be called any number of times (once per memory chunk). Bounded by
  /// GNIO_BOOTSTRAP_TIMEOUT: Error(Timeout) names the node ranks that did not take part;
  /// Error(RemoteError) when a node rank's connection closes. On error no descriptor is leaked,
  /// and every later call throws Error(RemoteError) (the node's ranks are out of step).
  std::vector<int> allgather_fd(int my_fd);

  /// The world ranks of this node, ascending.
  const std::vector<int>& node_ranks() const { return node_ranks_; }
  /// This rank's position in node_ranks().
  int local_index() const { return my_index_; }

 private:
  std::vector<int> exchange(int my_fd);
  void connect_all(const Deadline& deadline);
  std::string socket_name(int world_rank) const;

  Bootstrap& bootstrap_;
  std::vector<int> node_ranks_;
  std::uint64_t token_;
  int my_index_ = -1;
  double timeout_s_;
  bootstrap::Fd listener_;
  std::vector<bootstrap::Fd> peers_;  // by position; empty for self
  bool connected_ = false;
  std::uint32_t seq_ = 0;
  std::string broken_;  // set by a failed call: the connections are out of step for good
  std::mutex mutex_;
};

}  // namespace gnio
