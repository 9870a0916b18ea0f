// The RMA benchmark suite, written once against a small interface (RmaLibrary) that gnio-perf
// implements with gnio's device API and nvshmem-perf with NVSHMEM's. The suite decides what runs
// (cases, sizes, iterations, launch shapes), prepares and checks the data, times the launches,
// prints the tables and writes the JSON; a library only allocates, fills, checks and launches.
//
// What each figure means (also printed in the table header and stored in the JSON):
//  * lat put          one group: put(S) then quiet(), ITERS times; time = per put, issue to
//                     completion (the data is in the peer's memory when quiet returns).
//  * lat get          one group: blocking get(S), ITERS times; time = per get. Successive gets
//                     read different 256-byte-aligned windows of the peer's buffer so no cache
//                     serves a repeat.
//  * lat put_signal   ping-pong: rank 0 put_signal(S, Set i) -> rank 1 waits for i, answers with
//                     put_signal(S, Set i) -> rank 0 waits; time = one way = round trip / 2.
//  * lat fetch_add,   one thread: ITERS remote 64-bit atomics on rank 1's word, each waiting for
//    compare_swap     the previous one's result; time = per atomic round trip.
//  * bw               rank 0 -> rank 1; BLOCKS x THREADS threads, the message split among the
//                     groups (thread, warp or block), each group moving its share with one call
//                     at its scope; ITERS repetitions, then quiet; time = per repetition of the
//                     whole message, GB/s = S / time.
//  * bibw             both ranks at once (each block pairs up with its peer block at kernel start);
//                     time = per repetition, the slower rank's; GB/s = 2 S / time.
// Every figure is the median (and min, max) over REPS eager launches, each one kernel running an
// in-kernel loop, timed with CUDA events (a steady clock on the host backend). Before timing,
// every (case, size) runs once on poisoned destinations with a non-zero pattern and every byte
// (plus a guard behind the message, and the put_signal signals) is checked: #wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver.hpp"
#include "rma_model.hpp"

namespace gnio::perf {

/// One kernel launch the suite asks a library to make.
struct RmaLaunch {
  RmaOp op = RmaOp::Put;
  Scope scope = Scope::Thread;
  Mode mode = Mode::Lat;
  bool responder = false;   ///< put_signal ping-pong: the side that waits first (rank 1)
  bool check = false;       ///< the data-check run (atomics verify the final value too)
  std::uint64_t bytes = 0;  ///< message size (8 for atomics)
  std::uint32_t iters = 0;  ///< operations (lat) or repetitions (bw) in the kernel's loop
  unsigned blocks = 1;      ///< launch shape
  unsigned threads = 1;
  Split split;                      ///< bw/bibw: the message's split among the groups
  std::uint64_t window_stride = 0;  ///< get: iteration i reads at (i % window_slots) * stride
  std::uint32_t window_slots = 1;
  std::uint64_t signal_base = 0;   ///< signal values of this launch are signal_base + 1 .. + iters
  std::uint64_t atomic_start = 0;  ///< atomics: the target word's value when the launch starts
  int peer = 0;
};

/// The two per-rank buffers every measurement uses.
enum class Buffer {
  Sym,   ///< symmetric: receives puts, is read by the peer's gets
  Priv,  ///< private device memory: the source of puts, receives gets
};

/// What a library provides to the suite. All methods are called by every rank in the same order
/// unless noted ("local": only the ranks that need it call).
class RmaLibrary {
 public:
  virtual ~RmaLibrary() = default;

  // ---- identity (local) ----
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gnio" or "nvshmem"; the library's version; "cuda" or "host"; one line about the device.
  virtual std::string library() const = 0;
  virtual std::string version() const = 0;
  virtual std::string backend() const = 0;
  virtual std::string device() const = 0;
  virtual bool on_gpu() const = 0;
  /// Default launch shape of bandwidth kernels on this device.
  virtual unsigned default_blocks() const = 0;
  virtual unsigned default_threads() const = 0;

  // ---- collectives over all ranks (host side) ----
  virtual void barrier() = 0;
  /// Every rank's `value`, indexed by rank.
  virtual std::vector<std::uint64_t> allgather(std::uint64_t value) = 0;

  // ---- memory ----
  /// Allocates (collectively) Sym and Priv buffers of `buffer_bytes` each and `signals.words`
  /// zeroed 64-bit symmetric signal words laid out as `signals` says, then fills both buffers
  /// with a background pattern so that no measurement ever moves zeros.
  virtual void allocate(std::uint64_t buffer_bytes, const SignalLayout& signals) = 0;
  /// Local: writes the pattern of `seed` into [0, bytes) of `b`, or the poison.
  virtual void fill(Buffer b, std::uint64_t bytes, std::uint64_t seed) = 0;
  virtual void poison(Buffer b, std::uint64_t bytes) = 0;
  /// Local: wrong bytes in [0, bytes) of `b` against `seed`, plus non-poison bytes in the
  /// following `guard` bytes.
  virtual std::uint64_t count_wrong(Buffer b, std::uint64_t bytes, std::uint64_t guard,
                                    std::uint64_t seed) = 0;
  /// Local: reads `count` signal words starting at word `first`.
  virtual std::vector<std::uint64_t> read_signals(std::uint64_t first, std::uint64_t count) = 0;
  /// Local: sets signal word `index` to `value`.
  virtual void write_signal(std::uint64_t index, std::uint64_t value) = 0;
  /// Local: the mismatches atomics kernels counted since the last call (and resets the count).
  virtual std::uint64_t take_kernel_errors() = 0;

  // ---- kernels (local) ----
  /// Queues the launch; with `timed`, between a start and a stop timestamp.
  virtual void launch(const RmaLaunch& l, bool timed) = 0;
  /// Waits for the queued launches (bounded; throws on device errors). Returns the microseconds
  /// of the last timed launch, or 0 when none was timed.
  virtual double wait() = 0;
};

/// Options of the rma subcommand, as parsed from the command line.
struct RmaOptions {
  std::vector<RmaOp> ops;     ///< --op (fetch_add and compare_swap both come from "atomic")
  std::vector<Scope> scopes;  ///< --scope
  std::vector<Mode> modes;    ///< --mode
  unsigned blocks = 0;        ///< --blocks (0: the library's default)
  unsigned threads = 0;       ///< --threads (0: the library's default)
  unsigned reps = 0;          ///< --reps (0: default)
  std::uint64_t lat_max = 0;  ///< --lat-max (0: default 1M)
};

/// Adds the rma subcommand's own options to the driver's command line, parsed into `opts`
/// (rma_options.cpp; make_subcommand<RmaOptions> registers it).
void add_rma_options(OptionList& options, RmaOptions& opts);

/// Runs the suite on `lib` (every rank calls it). Returns the process exit status: 0, or
/// kExitWrongData when a data check failed on any rank. Throws UsageError for a job with fewer
/// than 2 ranks.
int run_rma_suite(RmaLibrary& lib, const CommonOptions& common, const RmaOptions& opts);

/// Names as printed and stored ("put", "thread", "bw", ...).
const char* to_string(RmaOp op);
const char* to_string(Scope s);
const char* to_string(Mode m);

}  // namespace gnio::perf
