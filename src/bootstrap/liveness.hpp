// Peer-failure detection: every rank of a communicator keeps one small TCP connection to rank 0
// (the hub), separate from the bootstrap's data connections, on which both ends send heartbeats
// and, when they leave in order, a goodbye. A connection that closes or resets without a goodbye,
// or stays silent too long, means the rank at the other end died or was cut off; the hub tells
// every other rank at once.
//
// Why a star on rank 0, and not the root service or a ring of neighbours:
//  * The root service is gone after the rendezvous and may live in a process that is not a rank
//    (create_unique_id()), so it cannot watch the job's lifetime.
//  * The bootstrap's own connections are opened lazily, one-way, and only between ranks that
//    exchange messages, so most pairs have none; they cannot tell a dead peer from a quiet one.
//  * A ring needs a death to be flooded hop by hop around a broken ring (and two deaths split it);
//    the star reaches every survivor in one relay: a leaf's death is seen by the hub and relayed
//    to all, the hub's death is seen by every leaf directly. Its cost is size-1 sockets and
//    heartbeats on rank 0 only (16 bytes per rank per interval), which is small next to what a
//    rank 0 already does at scale.
// The price of the star: once rank 0 has left in order (destroyed its Comm), the others are no
// longer watched; by then the job is tearing down.
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
  double interval_s = 1;   ///< heartbeat period on every connection (> 0)
  double silence_s = 10;   ///< a connection silent this long is lost (> interval_s)
  double connect_s = 120;  ///< every rank must open its connection within this (after creation)
};

/// Called once per lost rank, on the watcher's thread: the rank and a sentence saying who it was
/// and what was seen ("rank 3 (host pid 123) died or became unreachable: ..."). Must not block.
using PeerLossHandler = std::function<void(int rank, const std::string& what)>;

/// Watches every rank of a job for death and network loss (see the file comment). Creation is
/// collective over the bootstrap (one allgather); destruction says goodbye, waits at most about a
/// second for the other end to acknowledge, and joins the thread. A job of one rank watches
/// nothing and starts no thread.
class LivenessWatcher {
 public:
  /// Exchanges the hub address and every rank's host and pid over `bootstrap`, connects to the
  /// hub (leaves) and starts the thread. Throws gnio::Error when the hub cannot be reached.
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
    std::uint8_t family;  // of the hub's address, in rank 0's card only
    std::uint8_t pad0;
    std::uint16_t port;
    std::uint32_t scope_id;
    std::uint8_t addr[16];
    char host[56];
  };
  void run() noexcept;

  const int rank_;
  const int size_;
  const std::uint64_t token_;
  const LivenessOptions options_;
  PeerLossHandler on_loss_;
  std::vector<Card> cards_;
  Fd listener_;  // the hub's (rank 0 only)
  Fd hub_;       // a leaf's connection to the hub, handed to the thread
  Waker waker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gnio::bootstrap
