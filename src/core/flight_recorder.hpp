// The flight recorder (GNIO_FLIGHT_RECORDER): a fixed ring of the last host-side operations of a
// communicator, written to a JSON file per rank when the job goes wrong, so that
// tools/gnio-flight can tell which rank fell behind on which call.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gnio::detail {

/// What a flight-recorder entry describes.
enum class FlightEvent : std::uint8_t {
  Collective,   ///< a host collective enqueued on a stream (its stream's sequence)
  Alloc,        ///< collective symmetric allocation (the host sequence)
  Free,         ///< collective free (the host sequence)
  Register,     ///< collective buffer registration (the host sequence)
  Deregister,   ///< collective deregistration (the host sequence)
  Split,        ///< team split (the host sequence)
  Synchronize,  ///< Comm::synchronize (local, no sequence across ranks)
  Check,        ///< Comm::check (local)
  Abort,        ///< Comm::abort (local)
};

/// Name of an event as written in the dump ("collective", "alloc", ...).
const char* to_string(FlightEvent e) noexcept;

/// One recorded operation. Fixed size and trivially copyable: recording never allocates. Name
/// fields point at static strings (the collectives' to_string results).
struct FlightEntry {
  std::uint64_t seq = 0;         ///< 1-based number of the entry on this rank
  std::uint64_t stream_seq = 0;  ///< 1-based number within its sequence stream; 0 = local event
  std::int64_t time_ns = 0;      ///< wall clock (CLOCK_REALTIME), comparable across hosts roughly
  std::uint64_t count = 0;       ///< elements (collective), bytes (alloc, register), or calls
                                 ///< (consecutive repeats of a local event)
  std::uint64_t stream = 0;      ///< the stream's address on this rank (collectives)
  const char* what = nullptr;    ///< collective name, or null
  const char* type = nullptr;    ///< data type name, or null
  const char* op = nullptr;      ///< reduction operator name, or null
  const char* algo = nullptr;    ///< algorithm name, or null
  std::int32_t root = -1;        ///< root rank, or -1
  std::int32_t channel = -1;  ///< sequence stream: -1 = host operations, k = collective channel k
  FlightEvent event = FlightEvent::Check;
};

/// A flight-recorder entry of a collective host operation of `bytes`.
inline FlightEntry host_op(FlightEvent event, std::uint64_t bytes = 0) {
  FlightEntry e;
  e.event = event;
  e.count = bytes;
  return e;
}

/// The ring. record() takes a mutex that only a dump contends for: a few tens of nanoseconds per
/// host call, no allocation after construction.
class FlightRecorder {
 public:
  /// Channels that get their own collective sequence; later ones share the last counter.
  static constexpr int kMaxChannels = 64;

  /// A ring of `capacity` entries (0 = disabled: record() returns at once).
  explicit FlightRecorder(std::size_t capacity);

  /// Whether recording is on.
  bool enabled() const noexcept { return !ring_.empty(); }
  /// Stamps `e` with its sequence numbers and time and stores it, overwriting the oldest entry
  /// when the ring is full. `e.channel` and `e.event` pick the sequence stream.
  void record(FlightEntry e) noexcept;
  /// The entries still in the ring, oldest first.
  std::vector<FlightEntry> snapshot() const;
  /// Entries recorded so far (including overwritten ones).
  std::uint64_t recorded() const;

  /// Writes the dump of rank `rank` of `size` (communicator `comm_id`) as JSON to `path`
  /// (through a temporary file and a rename, so readers never see half a file). Returns false
  /// and sets `error` when the file cannot be written.
  bool dump(const std::string& path, std::uint32_t comm_id, int rank, int size, const char* reason,
            const std::string& detail, std::string* error) const;

 private:
  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;
  std::uint64_t next_ = 0;  // entries recorded
  std::uint64_t host_seq_ = 0;
  std::uint64_t channel_seq_[kMaxChannels] = {};
};

/// The dump file of `rank` of communicator `comm_id` under directory `dir`.
std::string flight_dump_path(const std::string& dir, std::uint32_t comm_id, int rank);

}  // namespace gnio::detail
