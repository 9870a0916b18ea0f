// The state behind a Comm (internal). Its members are defined by concept: creation, teardown and
// internal memory in comm_impl.cpp, make_team in comm_teams.cpp, the failure paths (peer or link
// lost, the flight dump, check) in comm_failures.cpp.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/fd_exchange.hpp"
#include "bootstrap/liveness.hpp"
#include "core/flight_recorder.hpp"
#include "gnio/comm.hpp"
#include "memory/symmetric_heap.hpp"
#include "memory/window.hpp"
#include "platform/backend.hpp"

namespace gnio::proxy {
class Proxy;
}

namespace gnio::detail {

/// Why the flight recorder is dumped (bits of CommImpl::flight_dumped).
enum class FlightDump : unsigned { Timeout = 1, RemoteError = 2, Abort = 4, PeerLost = 8 };

class CommImpl {
 public:
  CommImpl(std::unique_ptr<Bootstrap> bootstrap, LaunchInfo info, const CommOptions& options);
  ~CommImpl();

  /// Allocates `bytes` of gnio-internal symmetric memory (collective), 256-byte aligned, and
  /// clears it on this rank unless `clear` is false.
  SymPtr<char> alloc_internal(std::size_t bytes, bool clear = true);
  /// Builds a team from its world ranks (collective over all ranks).
  Team make_team(const std::vector<int>& members);
  /// Describes the symmetric-heap location `offset` for error messages.
  std::string describe_offset(std::uint64_t offset) const;
  /// Throws the recorded device error or peer loss, if any.
  void check() const;
  /// Throws Error(RemoteError) naming the lost rank once the liveness watcher saw one die.
  void check_alive() const;
  /// The liveness watcher's report (on its thread): records the first lost rank, aborts device
  /// waits (Status::RemoteError) and fails every pending and later bootstrap call.
  void on_peer_lost(int rank, const std::string& what) noexcept;
  /// The proxy lost its connection to `rank` (no goodbye, or a send failed): unless the
  /// communicator already aborted, device waits end with RemoteError naming `rank`. The host
  /// error is the proxy's own (Proxy::check); the bootstrap is left alone (a cut link is not
  /// necessarily a dead rank).
  void on_link_lost(int rank) noexcept;
  /// Ends device waits with Status::RemoteError, DeviceComm::failed_rank() = `rank`.
  void abort_device_for(int rank) noexcept;
  /// Adds `e` to the flight recorder (nothing when GNIO_FLIGHT_RECORDER=0).
  void record(const FlightEntry& e) noexcept { flight.record(e); }
  /// Writes this rank's flight-recorder dump, once per `reason` class (a job that keeps calling
  /// check() after a timeout writes one file, not one per call), and logs where it went.
  void dump_flight(FlightDump reason, const std::string& detail) noexcept;

  LaunchInfo info;
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<platform::Backend> backend;
  Backend backend_kind = Backend::Host;
  std::string node_id;
  int node = 0;
  int nodes = 1;
  std::vector<int> node_ranks;
  int local_rank = 0;
  std::vector<int> node_of_rank;  // node index of every rank
  std::unique_ptr<FdExchange> fds;
  std::unique_ptr<SymmetricHeap> heap;
  std::uint32_t heap_id = 0;
  DeviceControl* control = nullptr;
  CUstream_st* cuda_stream = nullptr;  // internal stream for setup copies
  HostStream* host_stream = nullptr;
  SymPtr<std::int16_t> local_index_table{};
  SymPtr<std::uint32_t> stall_claim{};  // device-memory claim word of the stall record
  Team world{};
  Team node_team{};
  std::uint32_t next_team_id = 0;
  /// Host copies of non-strided teams' member tables (Team::host_members_table); a deque, so
  /// they never move.
  std::deque<std::vector<int>> team_tables;
  std::size_t internal_bytes = 0;
  std::uint64_t next_window_id = 1;  // same on every rank: registration is collective
  WindowStats window_stats;
  double timeout_s = 0;
  std::atomic<bool> aborted{false};
  // The proxy transport to ranks on other nodes (null: one node, or GNIO_NET=none). Destroyed in
  // ~CommImpl after the final barrier and before the heap it writes into.
  std::unique_ptr<proxy::Proxy> proxy;
  // Peer-failure detection (null when GNIO_HEARTBEAT_INTERVAL=0 or a single rank). Declared
  // after what on_peer_lost touches; destroyed explicitly in ~CommImpl, before the heap.
  std::unique_ptr<bootstrap::LivenessWatcher> liveness;
  std::atomic<bool> peer_lost{false};
  FlightRecorder flight;
  std::string flight_dir;
  std::atomic<unsigned> flight_dumped{0};  // FlightDump bits already written
  mutable std::mutex loss_mutex;  // guards lost_rank and loss (written once, on the watcher)
  int lost_rank = -1;
  std::string loss;
  mutable std::mutex mutex;  // serialises collective host calls made from several threads
  // Collectives (src/coll/coll_state.hpp): per-communicator channel state, created on first use.
  std::shared_ptr<void> coll_state;

  StreamRef internal_stream() const;
};

}  // namespace gnio::detail
