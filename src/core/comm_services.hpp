// What the layers built on a communicator (the collectives, packet I/O) may use of it beyond its
// public API: the node of every rank, the platform backend, gnio-internal symmetric memory, teams
// of any members, the network transport's landing regions, the bootstrap's collectives, the flight
// recorder and one slot of per-communicator state for the collectives. Its shape (rank, size,
// nodes, teams) they read from the public Comm (comm()). Nothing else of the communicator's
// insides (CommImpl) is theirs to touch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/flight_recorder.hpp"
#include "gnio/comm.hpp"
#include "platform/backend.hpp"

namespace gnio::detail {

class CommImpl;

/// A region of the network transport's host memory that peers on other nodes write into (the
/// collectives' pipes to other nodes): `inbox` receives, `outbox` is what this rank sends from.
struct LandingRegion {
  std::uint32_t id = 0;  ///< names the region on the wire; the same on every rank
  char* inbox = nullptr;
  char* outbox = nullptr;
};

/// A view of one communicator for the layers above core. Cheap to copy; valid while the Comm
/// object it was made from is.
class CommServices {
 public:
  explicit CommServices(const Comm& comm);

  /// The communicator viewed: its rank(), size(), nodes(), local_rank(), local_size(), backend(),
  /// world() and node_team().
  const Comm& comm() const noexcept { return *comm_; }
  /// The node index of every rank.
  const std::vector<int>& node_of_rank() const noexcept;
  platform::Backend& backend() const noexcept;

  /// Serialises the collective setup calls below when host threads call them concurrently.
  std::mutex& setup_mutex() const noexcept;
  /// A team of the given world ranks (collective over all ranks; hold setup_mutex()).
  Team make_team(const std::vector<int>& members) const;
  /// `bytes` of gnio-internal symmetric memory, 256-byte aligned (collective over all ranks; hold
  /// setup_mutex()); cleared on this rank when `clear` (otherwise its content is undefined).
  SymPtr<char> alloc_internal(std::size_t bytes, bool clear = true) const;
  /// True when [p, p + bytes) lies in this rank's symmetric heap.
  bool in_heap(const void* p, std::size_t bytes) const noexcept;

  /// True when a network transport reaches the ranks on other nodes.
  bool has_network() const noexcept;
  /// Adds a landing region of `inbox_bytes` to receive into and `outbox_bytes` to send from
  /// (collective: every rank adds the same regions in the same order). Needs has_network().
  LandingRegion add_landing(std::uint64_t inbox_bytes, std::uint64_t outbox_bytes) const;

  /// The bootstrap's barrier and allgather (`bytes` per rank, this rank's in its own slot).
  void barrier() const;
  void allgather(void* slots, std::size_t bytes) const;

  bool flight_enabled() const noexcept;
  void record(const FlightEntry& e) const noexcept;

  /// The collectives' per-communicator state (null until they make it; hold setup_mutex()).
  std::shared_ptr<void>& coll_state() const noexcept;

 private:
  const Comm* comm_;
  CommImpl* impl_;
};

}  // namespace gnio::detail
