// What the layers built on a communicator (the collectives, packet I/O) may use of it: its shape,
// gnio-internal symmetric memory, teams, the network transport's landing regions, the bootstrap's
// collectives, the flight recorder and one slot of per-communicator state for the collectives.
// Nothing else of the communicator's insides (CommImpl) is theirs to touch.
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

/// A view of one communicator for the layers above core. Cheap to copy; valid while the Comm is.
class CommServices {
 public:
  explicit CommServices(const Comm& comm);

  int rank() const noexcept;
  int size() const noexcept;
  int nodes() const noexcept;
  /// This rank's index among the ranks of its node.
  int local_rank() const noexcept;
  /// The node index of every rank.
  const std::vector<int>& node_of_rank() const noexcept;
  /// How many ranks share this rank's node.
  std::size_t ranks_on_node() const noexcept;
  Backend backend_kind() const noexcept;
  platform::Backend& backend() const noexcept;
  const Team& world() const noexcept;
  const Team& node_team() const noexcept;

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
  CommImpl* impl_;
};

}  // namespace gnio::detail
