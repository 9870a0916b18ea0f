// Peer-failure detection: the ranks of a communicator form a tree (rank r's parent is
// (r - 1) / F for the fan-out F = GNIO_LIVENESS_FANOUT), and every rank keeps one small TCP
// connection to its parent and one to each child, separate from the bootstrap's data
// connections. Both ends send heartbeats and, when they leave in order, a goodbye. A connection
// that closes or resets without a goodbye, or stays silent too long, means the rank at the other
// end died or was cut off; the rank that saw it tells its other neighbours, and each rank passes
// the news on to its neighbours but the one it came from, so it floods the tree.
//
// Why a tree, and not a star on rank 0, the root service or a ring:
//  * A star (what this was until 2026-12-05) puts N - 1 sockets and heartbeats on rank 0 and
//    makes rank 0's death a special case; a tree keeps every rank at F + 1 connections at most.
//  * The root service is gone after the rendezvous and may live in a process that is not a rank
//    (create_unique_id()), so it cannot watch the job's lifetime.
//  * The bootstrap's own connections are opened lazily, one-way, and only between ranks that
//    exchange messages, so most pairs have none; they cannot tell a dead peer from a quiet one.
//  * A ring needs N / 2 relays to reach everyone; the tree needs at most twice its depth,
//    2 * ceil(log_F N) (16 384 ranks, F = 8: 10), each a message on a connection already open.
// A dead rank splits the tree, and each part holds one of its neighbours, which saw the death
// directly: every survivor hears of it. A second death in the same moment may hide behind the
// first from some survivors; they still hear of the first, which aborts the communicator anyway.
// Detection: at once for a killed process (its connections close), within the silence time for
// a stopped one or a cut network; then one relay per hop. The price of the tree: once a rank has
// left in order (destroyed its Comm), the parts it joined are no longer watched across it; by
// then the job is tearing down.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio::bootstrap {

/// Timing of a LivenessWatcher.
struct LivenessOptions {
  int fanout = 8;          ///< children per rank in the tree (1..255; the same on every rank)
  double interval_s = 1;   ///< heartbeat period on every connection (> 0)
  double silence_s = 10;   ///< a connection silent this long is lost (> interval_s)
  double connect_s = 120;  ///< every rank must open its connection within this (after creation)
};

/// Called once per lost rank, on the watcher's thread: the rank and a sentence saying who it was
/// and what was seen ("rank 3 (host pid 123) died or became unreachable: ..."). Must not block.
using PeerLossHandler = std::function<void(int rank, const std::string& what)>;

/// Watches every rank of a job for death and network loss (see the file comment). Creation is
/// collective over the bootstrap (one allgather); destruction says goodbye, waits at most about a
/// second for the other ends to acknowledge, and joins the thread. A job of one rank watches
/// nothing and starts no thread.
class LivenessWatcher {
 public:
  /// Exchanges every rank's host, pid and (ranks with children) listening address over
  /// `bootstrap`, connects to this rank's parent and starts the thread. Throws gnio::Error when
  /// the parent cannot be reached or the ranks disagree on the fan-out.
  LivenessWatcher(Bootstrap& bootstrap, const LivenessOptions& options, PeerLossHandler on_loss);
  /// Says goodbye (an orderly exit is never reported as a loss by the others) and joins.
  ~LivenessWatcher();
  LivenessWatcher(const LivenessWatcher&) = delete;
  LivenessWatcher& operator=(const LivenessWatcher&) = delete;

  /// "rank 3 (host pid 123)", from what every rank told at creation.
  std::string describe(int rank) const;

 private:
  struct Card {
    std::uint32_t pid;
    std::uint8_t family;  // of the rank's liveness listener (ranks with children only)
    std::uint8_t fanout;  // the rank's LivenessOptions::fanout
    std::uint16_t port;
    std::uint32_t scope_id;
    std::uint8_t addr[16];
    char host[56];
  };
  void run() noexcept;
  /// The tree: rank r's parent (-1 for rank 0) and its first child (children are consecutive;
  /// none at or past size).
  int parent_of(int r) const { return r == 0 ? -1 : (r - 1) / options_.fanout; }
  long long first_child_of(int r) const { return static_cast<long long>(r) * options_.fanout + 1; }
  bool has_children(int r) const { return first_child_of(r) < size_; }

  const int rank_;
  const int size_;
  const std::uint64_t token_;
  const LivenessOptions options_;
  PeerLossHandler on_loss_;
  std::vector<Card> cards_;
  Fd listener_;  // for this rank's children (ranks with children only)
  Fd parent_;    // the connection to this rank's parent, handed to the thread
  Waker waker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gnio::bootstrap
