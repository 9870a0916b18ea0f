// The tcp network backend's connections: `lanes` TCP sockets (GNIO_NET_NSOCKS) between this rank
// and each rank on another node. Every connection opens with a hello that carries the job token,
// both ranks and the lane, so a stray client (port scan, another job) is dropped without
// disturbing the job.
//
// Two ways to connect (GNIO_NET_CONNECT):
//  * on first use (the default): a rank opens its sending sockets to a peer when it first has a
//    frame for it, and receives on the sockets that peer opened to it (accepted on this rank's
//    listener by the receiving threads). A pair that talks both ways holds two sets, one per
//    direction (every pair that exchanges puts does: acks travel back); a pair that never talks
//    holds none, so a rank's sockets grow with the peers it uses, not with the job. Each rank
//    writes only on the sockets it opened, so two ranks that first talk to each other at the same
//    moment need no agreement on who connects.
//  * at creation: one socket per pair and lane, opened collectively while the communicator is
//    created (the lower rank accepts, the higher one connects) and used both ways.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "bootstrap/socket.hpp"
#include "gnio/bootstrap.hpp"

struct pollfd;

namespace gnio::net {

/// Connected, non-blocking TCP sockets: `lanes()` per remote peer and direction.
class TcpMesh {
 public:
  enum class Connect { OnFirstUse, AtCreation };
  /// A receiving socket accept() completed (its hello read and checked).
  struct Accepted {
    int peer;
    int lane;
  };

  /// How many sockets per remote peer and direction a rank asks for: `asked` (GNIO_NET_NSOCKS),
  /// or with `asked` 0 the mesh's choice, the smallest `preferred` of the ranks that leave it to
  /// the mesh (what suits each: its backend decides), so that ranks of different kinds agree.
  struct LaneRequest {
    int asked;
    int preferred;
  };

  /// Collective over every rank of `bootstrap` (ranks without remote peers take part too):
  /// settles the lane count (LaneRequest), listens and exchanges addresses; with
  /// Connect::AtCreation also connects lanes() sockets to each remote peer of lower rank and
  /// accepts the others'. Each step is bounded by `timeout_s` (0 = no limit). `node_of_rank[r]`
  /// is rank r's node. Throws Error(InvalidArgument) when the ranks end with different lane
  /// counts or ask for different ways to connect.
  TcpMesh(Bootstrap& bootstrap, const std::vector<int>& node_of_rank, double timeout_s,
          LaneRequest lanes, Connect connect);
  ~TcpMesh();

  /// Sockets per remote peer and direction.
  int lanes() const { return lanes_; }
  /// Ranks on other nodes, ascending.
  const std::vector<int>& peers() const { return peers_; }
  /// Whether `peer` is a rank on another node.
  bool remote(int peer) const {
    return peer >= 0 && static_cast<std::size_t>(peer) < remote_.size() && remote_[peer];
  }
  /// Whether sockets were opened at creation (and serve both directions).
  bool connected_at_creation() const { return connect_ == Connect::AtCreation; }
  /// Index of socket `lane` to `peer` among connections() (per-connection state is kept in
  /// arrays laid out the same way).
  std::size_t connection(int peer, int lane) const {
    return static_cast<std::size_t>(peer) * static_cast<std::size_t>(lanes_) +
           static_cast<std::size_t>(lane);
  }
  /// The peer and the lane of connection index `c` (the inverse of connection()).
  int peer_of(std::size_t c) const {
    return static_cast<int>(c / static_cast<std::size_t>(lanes_));
  }
  int lane_of(std::size_t c) const {
    return static_cast<int>(c % static_cast<std::size_t>(lanes_));
  }
  /// Number of (rank, lane) pairs, local ranks included.
  std::size_t connections() const { return send_.size(); }

  // ---- sending: only lane `lane`'s sending thread calls these for that lane ----

  /// The socket this rank sends on to remote `peer` over `lane`, connected (hello included) on
  /// first use within the timeout; -1 with *err set (an errno value; ETIMEDOUT) when it cannot be
  /// connected: the peer died or cannot be reached.
  int send_fd(int peer, int lane, int* err);
  /// Whether this rank's sending socket to `peer` over `lane` is open (the goodbye goes there).
  bool sending_to(int peer, int lane) const { return send_[connection(peer, lane)].get() >= 0; }

  // ---- watching the sending sockets (connections on first use) ----
  // The peer never writes on a socket this rank opened, but for a goodbye when it stops
  // receiving in order; so a sending socket that becomes readable without one was closed by the
  // peer (it rejected a frame, or failed). Lane 0's receiving thread watches them.

  /// A descriptor that becomes readable when send_fd() opened sockets since take_opened().
  int opened_fd() const { return opened_waker_.fd(); }
  /// The sending sockets opened since the last call, each (peer, lane); their descriptors are
  /// send_fd()'s, readable by the caller once returned here.
  std::vector<Accepted> take_opened();
  /// The socket this rank sends on to `peer` over `lane` for the watching thread (after
  /// take_opened() returned it); -1 if none.
  int watched_fd(int peer, int lane) const;

  // ---- receiving ----

  /// The socket this rank receives on from `peer` over `lane`; -1 while that peer has not
  /// connected. Only lane `lane`'s receiving thread reads it, after accept_ready() handed it over.
  int receive_fd(int peer, int lane) const;
  /// Lane 0's receiving thread: what to poll for new connections (the listener and the
  /// connections still greeting); nothing when every socket was opened at creation.
  void add_accept_fds(std::vector<pollfd>& fds) const;
  /// Lane 0's receiving thread: accepts what the listener holds and reads the hellos that
  /// arrived, without blocking; returns the connections now complete. A stray or bad hello is
  /// dropped (and logged once per source).
  std::vector<Accepted> accept_ready();

 private:
  struct Greeting;
  bool check_hello(const void* hello, int* from, int* lane) const;

  int me_ = 0;
  int lanes_ = 1;
  std::uint64_t token_ = 0;
  double timeout_s_ = 0;
  Connect connect_ = Connect::OnFirstUse;
  std::vector<bool> remote_;
  std::vector<int> peers_;
  std::vector<bootstrap::NetAddress> addrs_;
  // Per connection: the socket this rank sends on, and the one it receives on (the same socket
  // when connected at creation: then only send_ owns it).
  std::vector<bootstrap::Fd> send_;
  std::vector<bootstrap::Fd> receive_;
  std::vector<bool> accepted_;  // lane 0's receiving thread only
  bootstrap::Fd listener_;
  std::vector<Greeting> greeting_;  // lane 0's receiving thread only
  bootstrap::DropLog drops_;
  // Sending sockets opened on first use, for the watching thread.
  std::mutex opened_mutex_;
  std::vector<Accepted> opened_;
  std::vector<int> opened_fds_;  // by connection, written under opened_mutex_
  bootstrap::Waker opened_waker_;
};

}  // namespace gnio::net
