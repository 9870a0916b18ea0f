// How a proxy thread moves bytes between a socket (or a message a network handed over, or host
// memory a network sends from) and memory of this rank: directly where the
// thread can address that memory (the host backend's heap and buffers), and otherwise (GPU
// memory, no GPUDirect) through page-locked bounce buffers. Outbound (the sender thread): two
// bounce buffers, chunk k+1 copied out of GPU memory while chunk k is on the socket. Inbound (the
// receiver thread): a ring of bounce space the socket fills and Backend::deliver empties without
// the thread waiting for it, so the next frame arrives while the GPU takes this one; a delivery's
// completion mark tells the thread when data and signal are in place. Small deliveries are held
// back and handed over in batches when the thread has no more frames at hand (flush()), when a
// batch is full, or before anything that must follow them: a kernel launch per batch
// (Backend::deliver_batch), or with GNIO_PROXY_AGENT=1 the delivery agent, a resident block on
// the GPU that polls a ring in host memory (platform/delivery_agent.hpp; started at the first
// batch, stopped by idle() after kAgentIdleSpell without one). Large data goes through the copy
// engine on a stream, after everything handed over before it (with the agent, what follows it
// waits for its stream mark).
// Signals and remote atomics land after the data. Each proxy thread owns one Staging (it is not
// thread-safe); the protocol above it is the same on both backends.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "base/deadline.hpp"
#include "bootstrap/socket.hpp"
#include "platform/backend.hpp"
#include "platform/delivery_agent.hpp"
#include "transport/net/tcp/socket_reader.hpp"

namespace gnio::proxy {

class Staging {
 public:
  enum class Direction { Outbound, Inbound };
  /// The signal a received put carries: `op` (Store or Add) with `operand` on `word`.
  struct Signal {
    std::uint64_t* word;
    platform::WordOp op;
    std::uint64_t operand;
  };

  /// How long the delivery agent runs without a delivery before idle() stops it.
  static constexpr std::chrono::milliseconds kAgentIdleSpell{10};

  /// `direct`: the calling thread addresses every source and target itself (host backend);
  /// otherwise copies go through bounce buffers (Outbound: two of `chunk` bytes; Inbound: a ring
  /// of four) on streams of `backend` created here. `agent` (Inbound, staged): hand small
  /// deliveries to the delivery agent (default: GNIO_PROXY_AGENT).
  Staging(platform::Backend& backend, Direction direction, bool direct, std::size_t chunk,
          std::optional<bool> agent = std::nullopt);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  bool direct() const { return direct_; }

  // ---- Outbound ------------------------------------------------------------------------------
  /// Writes the frame header `head` and then `bytes` read from `src` (memory of this rank) to
  /// `fd`. *err as bootstrap::send_all.
  bootstrap::IoStatus send(int fd, const void* head, std::size_t head_bytes, const void* src,
                           std::size_t bytes, const Deadline& deadline, int* err);
  /// Copies `bytes` from `src` (memory of this rank) into `host` (memory this thread addresses),
  /// and waits for it: for networks that send from host memory themselves (ucx without CUDA).
  void read(void* host, const void* src, std::size_t bytes);

  // ---- Inbound -------------------------------------------------------------------------------
  /// Reads `bytes` from `fd` through `reader` (what it holds first) and queues them for `dst`
  /// (memory of this rank), then `signal` (may be null), without waiting for either to land: *mark
  /// is the delivery's mark, and completed() >= *mark once data and signal are in place (data
  /// first, so whoever sees the signal sees the data). Waits only for bounce space.
  bootstrap::IoStatus receive(net::SocketReader& reader, int fd, void* dst, std::size_t bytes,
                              const Signal* signal, const Deadline& deadline, int* err,
                              std::uint64_t* mark);
  /// As receive(), with the bytes taken from `src` (memory this thread addresses: a message a
  /// network handed over) instead of a socket. False when no bounce space came free in time.
  bool receive(const void* src, void* dst, std::size_t bytes, const Signal* signal,
               const Deadline& deadline, std::uint64_t* mark);
  /// Hands the deliveries held back for batching to the device; call it when no more frames are
  /// at hand (their marks complete only after this). settle(), word_atomic() and a receive()
  /// that waits for bounce space do it themselves.
  void flush();
  /// Call when the thread has nothing to do: stops the delivery agent once every delivery landed
  /// and none came for kAgentIdleSpell (a resident agent holds a block of the GPU, and a
  /// cudaDeviceSynchronize waits for it).
  void idle();
  /// True while the delivery agent runs (idle() will stop it).
  bool agent_running() const { return agent_running_; }
  /// The highest mark whose delivery is complete (every earlier one is too).
  std::uint64_t completed() const;
  /// The last mark handed out (completed() reaches it once every queued delivery landed).
  std::uint64_t issued() const { return issued_; }
  /// Waits until every delivery queued so far is complete; false on deadline.
  bool settle(const Deadline& deadline);
  /// Applies `op` to the word at `word` of this rank's memory (atomic with respect to device
  /// code, with acquire-release order, after every delivery queued before it) and returns the
  /// old value; waits for it.
  std::uint64_t word_atomic(void* word, unsigned width, platform::WordOp op, std::uint64_t operand,
                            std::uint64_t expected);

 private:
  /// A piece of the inbound ring, from `begin` up to the next piece's begin (or the ring head),
  /// in use until its delivery's mark completes.
  struct Piece {
    std::size_t begin;
    std::uint64_t mark;
  };

  platform::Backend& backend_;
  Direction direction_;
  bool direct_;
  std::size_t chunk_;
  char* bounce_[2] = {nullptr, nullptr};  // page-locked; Outbound: one per stream
  CUstream_st* cuda_[2] = {nullptr, nullptr};
  detail::HostStream* host_[2] = {nullptr, nullptr};
  // Inbound: the ring (bounce_[0], ring_bytes_), its pieces in flight, where the next goes.
  std::size_t ring_bytes_ = 0;
  std::deque<Piece> pieces_;
  std::size_t ring_head_ = 0;
  std::vector<platform::Delivery> batch_;  // small deliveries not yet handed to the device
  // With the agent: each held delivery's entry flags, and the run of entries since the last that
  // starts a batch of the agent's (what a new entry must not overlap to join it).
  std::vector<std::uint16_t> batch_flags_;
  std::vector<platform::Delivery> run_;
  std::size_t batch_limit_ = 1;    // GNIO_PROXY_BATCH
  std::uint64_t issued_ = 0;       // marks handed out
  std::uint64_t* done_ = nullptr;  // host-mapped: the completed mark (Inbound, staged)
  std::uint64_t direct_done_ = 0;  // direct: deliveries complete at once
  std::uint64_t* old_ = nullptr;   // host-mapped: where word_atomic's kernel leaves the old value
  // The delivery agent (Inbound, staged, `agent`): its ring (host-mapped) and stream, whether it
  // runs, entries written into the ring, the last mark it was given and the last one queued on
  // stream(0) (what later entries wait for), when it last got work.
  platform::DeliveryRing* ring_ = nullptr;
  platform::AgentScratch* agent_scratch_ = nullptr;  // alloc_device(): the agent's shared state
  CUstream_st* agent_cuda_ = nullptr;
  detail::HostStream* agent_host_ = nullptr;
  bool agent_running_ = false;
  std::uint64_t agent_tail_ = 0;
  std::uint64_t agent_head_ = 0;  // the agent's `head` as last read (publish())
  std::uint64_t agent_mark_ = 0;
  std::uint64_t stream_mark_ = 0;
  std::chrono::steady_clock::time_point agent_used_{};

  /// Waits for and frees what the constructor made (whatever part of it exists).
  void release() noexcept;
  StreamRef stream(int i) const { return host_[i] ? StreamRef(host_[i]) : StreamRef(cuda_[i]); }
  int streams() const { return direction_ == Direction::Outbound ? 2 : 1; }
  /// Where `bytes` (at most chunk_) of the inbound ring are free, once pieces whose deliveries
  /// completed are returned (waiting for them if needed); false on deadline.
  bool reserve(std::size_t bytes, const Deadline& deadline, std::size_t* at);
  /// send()'s and read()'s body (Outbound, staged): copies [src, src + bytes) out of this rank's
  /// memory chunk by chunk through the two bounce buffers, chunk k+1 while `take(at, chunk, n)`
  /// passes chunk k (bytes [at, at + n)) on; `started()` runs once the first copy is queued.
  /// Stops at the first status other than Ok (waiting for the copies in flight) and returns it.
  template <class Started, class Take>
  bootstrap::IoStatus copy_out(const void* src, std::size_t bytes, Started started, Take take);
  /// Queues `d` (one piece of a delivery): into the batch when it is small and does not overlap
  /// what the batch holds in a way the batch's order would break; otherwise after the batch.
  /// False when, with the agent, what it holds did not land before `deadline`.
  bool hand_over(const platform::Delivery& d, const Deadline& deadline);
  /// flush() with the agent: the batch into its ring (starting it if needed), as one batch of its.
  void publish();
  /// Waits until the agent applied mark `mark`; false on deadline.
  bool await_agent(std::uint64_t mark, const Deadline& deadline) const;
  /// Stops the agent and waits until it returned (everything published is applied first).
  void stop_agent();
  StreamRef agent_stream() const {
    return agent_host_ ? StreamRef(agent_host_) : StreamRef(agent_cuda_);
  }
  /// receive()'s body: `fill(to, at, n)` puts bytes [at, at + n) of the data at `to`.
  template <class Fill>
  bootstrap::IoStatus queue(void* dst, std::size_t bytes, const Signal* signal,
                            const Deadline& deadline, std::uint64_t* mark, Fill fill);
};

}  // namespace gnio::proxy
