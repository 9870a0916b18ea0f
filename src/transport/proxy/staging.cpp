#include "transport/proxy/staging.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/device/atomic.hpp"
#include "platform/word_op.hpp"

namespace gnio::proxy {
namespace {

/// Inbound pieces start 16-byte aligned, so deliver's kernel copies with 16-byte accesses.
constexpr std::size_t kPieceAlign = 16;
/// Inbound ring size in chunks: deliveries of up to this many chunks in flight.
constexpr std::size_t kRingChunks = 4;
/// How long the delivery agent may take no entry (ring full) or apply none (before a remote
/// atomic) before the proxy gives up on the GPU.
constexpr int kAgentStallSeconds = 60;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Polls `read()` (a counter the device advances) until `ready(value)`, yielding between looks;
/// `deadline` measures the absence of progress: it restarts whenever the value changes. False
/// once it expires.
template <class Read, class Ready>
bool await_progress(Read read, Ready ready, const Deadline& deadline) {
  Deadline d = deadline;
  for (std::uint64_t seen = read(); !ready(seen);) {
    if (d.expired()) return false;
    std::this_thread::yield();
    const std::uint64_t now = read();
    if (now != seen) d = d.renewed();
    seen = now;
  }
  return true;
}

}  // namespace

Staging::Staging(platform::Backend& backend, Direction direction, bool direct, std::size_t chunk,
                 std::optional<bool> agent)
    : backend_(backend), direction_(direction), direct_(direct), chunk_(chunk) {
  done_ = &direct_done_;
  if (direct_) return;
  const long long batch = config_int("GNIO_PROXY_BATCH");
  GNIO_REQUIRE(batch >= 1 && batch <= static_cast<long long>(platform::kMaxDeliveryBatch),
               "GNIO_PROXY_BATCH=%lld is not within 1..%zu", batch, platform::kMaxDeliveryBatch);
  batch_limit_ = static_cast<std::size_t>(batch);
  GNIO_REQUIRE(chunk_ > 0, "GNIO_PROXY_CHUNK must be positive");
  try {
    if (direction_ == Direction::Outbound) {
      for (int i = 0; i < 2; ++i)
        bounce_[i] = static_cast<char*>(backend_.alloc_host_mapped(chunk_));
    } else {
      ring_bytes_ = kRingChunks * round_up(chunk_, kPieceAlign);
      bounce_[0] = static_cast<char*>(backend_.alloc_host_mapped(ring_bytes_));
      done_ = static_cast<std::uint64_t*>(backend_.alloc_host_mapped(sizeof(std::uint64_t)));
      old_ = static_cast<std::uint64_t*>(backend_.alloc_host_mapped(sizeof(std::uint64_t)));
      if (agent.value_or(config_bool("GNIO_PROXY_AGENT"))) {
        ring_ = static_cast<platform::DeliveryRing*>(
            backend_.alloc_host_mapped(sizeof(platform::DeliveryRing)));
        std::memset(static_cast<void*>(ring_), 0, sizeof(platform::DeliveryRing));
        agent_scratch_ = static_cast<platform::AgentScratch*>(
            backend_.alloc_device(sizeof(platform::AgentScratch)));
        backend_.create_stream(&agent_cuda_, &agent_host_);
      }
    }
    for (int i = 0; i < streams(); ++i) backend_.create_stream(&cuda_[i], &host_[i]);
  } catch (...) {
    release();
    throw;
  }
}

Staging::~Staging() {
  release();
}

void Staging::release() noexcept {
  try {
    flush();
    if (agent_running_) stop_agent();
  } catch (...) {
    // Nothing waits for these deliveries any more.
  }
  if (agent_cuda_ || agent_host_) {
    backend_.destroy_stream(agent_cuda_, agent_host_);
    agent_cuda_ = nullptr;
    agent_host_ = nullptr;
  }
  backend_.free_host_mapped(ring_);
  ring_ = nullptr;
  backend_.free_device(agent_scratch_);
  agent_scratch_ = nullptr;
  for (int i = 0; i < 2; ++i) {
    if (cuda_[i] || host_[i]) {
      try {
        backend_.stream_synchronize(stream(i));
      } catch (...) {
        // A failed copy was reported when it happened; the buffers go either way.
      }
      backend_.destroy_stream(cuda_[i], host_[i]);
      cuda_[i] = nullptr;
      host_[i] = nullptr;
    }
    backend_.free_host_mapped(bounce_[i]);
    bounce_[i] = nullptr;
  }
  if (done_ != &direct_done_) backend_.free_host_mapped(done_);
  done_ = &direct_done_;
  backend_.free_host_mapped(old_);
  old_ = nullptr;
}

bootstrap::IoStatus Staging::send(int fd, const void* head, std::size_t head_bytes, const void* src,
                                  std::size_t bytes, const Deadline& deadline, int* err) {
  if (direct_ || bytes == 0)
    return bootstrap::send_all(fd, head, head_bytes, src, bytes, deadline, err);
  return copy_out(
      src, bytes,
      // The header goes out while the first chunk is being copied.
      [&] { return bootstrap::send_all(fd, head, head_bytes, nullptr, 0, deadline, err); },
      [&](std::size_t, const char* chunk, std::size_t n) {
        return bootstrap::send_all(fd, chunk, n, nullptr, 0, deadline, err);
      });
}

void Staging::read(void* host, const void* src, std::size_t bytes) {
  char* to = static_cast<char*>(host);
  if (direct_) {
    std::memcpy(to, src, bytes);
    return;
  }
  (void)copy_out(
      src, bytes, [] { return bootstrap::IoStatus::Ok; },
      [&](std::size_t at, const char* chunk, std::size_t n) {
        std::memcpy(to + at, chunk, n);
        return bootstrap::IoStatus::Ok;
      });
}

template <class Started, class Take>
bootstrap::IoStatus Staging::copy_out(const void* src, std::size_t bytes, Started started,
                                      Take take) {
  const char* from = static_cast<const char*>(src);
  const std::size_t chunks = (bytes + chunk_ - 1) / chunk_;
  auto length = [&](std::size_t k) { return std::min(chunk_, bytes - k * chunk_); };
  auto fetch = [&](std::size_t k) {
    backend_.copy(bounce_[k % 2], from + k * chunk_, length(k), stream(static_cast<int>(k % 2)));
  };
  if (chunks > 0) fetch(0);
  bootstrap::IoStatus st = started();
  for (std::size_t k = 0; k < chunks && st == bootstrap::IoStatus::Ok; ++k) {
    // Buffer (k+1)%2 held chunk k-1, which take() has passed on already.
    if (k + 1 < chunks) fetch(k + 1);
    backend_.stream_synchronize(stream(static_cast<int>(k % 2)));
    st = take(k * chunk_, bounce_[k % 2], length(k));
  }
  if (st != bootstrap::IoStatus::Ok)
    for (int i = 0; i < 2; ++i) backend_.stream_synchronize(stream(i));
  return st;
}

std::uint64_t Staging::completed() const {
  // With the agent every delivery's mark ends up in its ring (a large one's after its copy).
  return dev::atomic_load(ring_ ? &ring_->done : done_, dev::Order::Acquire);
}

void Staging::idle() {
  if (!agent_running_ || !batch_.empty() || completed() < issued_ ||
      std::chrono::steady_clock::now() - agent_used_ < kAgentIdleSpell)
    return;
  stop_agent();
}

void Staging::stop_agent() {
  dev::atomic_store(&ring_->stop, std::uint64_t{1}, dev::Order::Release);
  backend_.stream_synchronize(agent_stream());
  // The next start is stream-ordered after this store (a launch reads its memory afresh).
  dev::atomic_store(&ring_->stop, std::uint64_t{0}, dev::Order::Relaxed);
  agent_running_ = false;
}

bool Staging::await_agent(std::uint64_t mark, const Deadline& deadline) const {
  return await_progress([&] { return completed(); },
                        [&](std::uint64_t done) { return done >= mark; }, deadline);
}

bool Staging::settle(const Deadline& deadline) {
  flush();
  // A no-progress deadline counts again from each delivery that completes.
  return await_agent(issued_, deadline);
}

bool Staging::reserve(std::size_t bytes, const Deadline& deadline, std::size_t* at) {
  const std::size_t need = round_up(bytes, kPieceAlign);
  Deadline d = deadline;  // renewed by each delivery that completes, as in settle()
  std::uint64_t seen = completed();
  // The head never catches up with the oldest live piece from behind (the comparisons with
  // `tail` are strict), so head == tail means an empty ring.
  for (;;) {
    const std::uint64_t done = completed();
    while (!pieces_.empty() && pieces_.front().mark <= done) pieces_.pop_front();
    if (pieces_.empty()) ring_head_ = 0;
    const std::size_t tail = pieces_.empty() ? 0 : pieces_.front().begin;
    std::size_t begin = ring_bytes_;  // none found
    if (pieces_.empty() || ring_head_ > tail) {
      if (ring_head_ + need <= ring_bytes_)
        begin = ring_head_;
      else if (need < tail)
        begin = 0;
    } else if (ring_head_ + need < tail) {
      begin = ring_head_;
    }
    if (begin != ring_bytes_) {
      *at = begin;
      ring_head_ = begin + need;
      return true;
    }
    if (done != seen) d = d.renewed();
    seen = done;
    if (d.expired()) return false;
    // Pieces held in the batch complete only once it is handed over.
    flush();
    std::this_thread::yield();
  }
}

bootstrap::IoStatus Staging::receive(net::SocketReader& reader, int fd, void* dst,
                                     std::size_t bytes, const Signal* signal,
                                     const Deadline& deadline, int* err, std::uint64_t* mark) {
  return queue(dst, bytes, signal, deadline, mark, [&](char* to, std::size_t, std::size_t n) {
    return reader.read(fd, to, n, deadline, err);
  });
}

bool Staging::receive(const void* src, void* dst, std::size_t bytes, const Signal* signal,
                      const Deadline& deadline, std::uint64_t* mark) {
  const char* from = static_cast<const char*>(src);
  return queue(dst, bytes, signal, deadline, mark, [&](char* to, std::size_t at, std::size_t n) {
           std::memcpy(to, from + at, n);
           return bootstrap::IoStatus::Ok;
         }) == bootstrap::IoStatus::Ok;
}

template <class Fill>
bootstrap::IoStatus Staging::queue(void* dst, std::size_t bytes, const Signal* signal,
                                   const Deadline& deadline, std::uint64_t* mark, Fill fill) {
  char* to = static_cast<char*>(dst);
  if (direct_) {
    const bootstrap::IoStatus st = bytes ? fill(to, 0, bytes) : bootstrap::IoStatus::Ok;
    if (st != bootstrap::IoStatus::Ok) return st;
    // After the data, with release order: whoever sees the signal's new value sees the data.
    if (signal)
      (void)platform::apply_word_op(signal->word, sizeof(std::uint64_t), signal->op,
                                    signal->operand, 0, dev::Order::AcqRel);
    direct_done_ = *mark = ++issued_;
    return st;
  }
  // Chunk by chunk into the ring: the source fills piece k+1 while the GPU empties piece k. The
  // signal rides with the last piece (a put of no data: a delivery of the signal alone).
  std::size_t at = 0;
  do {
    const std::size_t n = std::min(chunk_, bytes - at);
    std::size_t begin = 0;
    if (n > 0) {
      if (!reserve(n, deadline, &begin)) return bootstrap::IoStatus::Timeout;
      const bootstrap::IoStatus st = fill(bounce_[0] + begin, at, n);
      if (st != bootstrap::IoStatus::Ok) {
        ring_head_ = begin;  // nothing was queued from this piece
        return st;
      }
    }
    const bool last = at + n == bytes;
    platform::Delivery d;
    d.dst = to + at;
    d.src = bounce_[0] + begin;
    d.bytes = n;
    if (last && signal) {
      d.word = signal->word;
      d.op = signal->op;
      d.operand = signal->operand;
    }
    d.done = done_;
    d.mark = ++issued_;
    if (!hand_over(d, deadline)) return bootstrap::IoStatus::Timeout;
    if (n > 0) pieces_.push_back(Piece{begin, d.mark});
    at += n;
  } while (at < bytes);
  *mark = issued_;
  return bootstrap::IoStatus::Ok;
}

namespace {

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

bool Staging::hand_over(const platform::Delivery& d, const Deadline& deadline) {
  if (d.bytes > platform::kMaxBatchedDeliveryBytes || (!ring_ && batch_limit_ == 1)) {
    flush();
    if (!ring_) {
      backend_.deliver(d, stream(0));
      return true;
    }
    // The copy engine moves the data once what the agent holds landed (it may overlap); the
    // signal and the mark follow through the agent once the copy is done.
    if (!await_agent(agent_mark_, deadline)) return false;
    platform::Delivery copy = d;
    copy.word = nullptr;
    copy.done = &ring_->stream_done;
    backend_.deliver(copy, stream(0));
    stream_mark_ = d.mark;
    platform::Delivery rest = d;
    rest.dst = nullptr;
    rest.src = nullptr;
    rest.bytes = 0;
    // Everything before it was applied: a run of its own starts.
    run_.assign(1, rest);
    batch_.push_back(rest);
    batch_flags_.push_back(platform::kAgentStartsBatch);
    return true;
  }
  // A batch writes all data before any signal: a piece whose data meets data the batch holds
  // (which of the two lands last is open) or a signal word it holds (the signal must land first)
  // starts a new batch. Its own signal may fall on held data: signals come after all data. With
  // the agent the batch is the run of entries since the last that started one, published or not
  // (the agent takes any stretch of it at once); without, what is held back here.
  const std::vector<platform::Delivery>& held_now = ring_ ? run_ : batch_;
  bool overlaps = false;
  for (const platform::Delivery& held : held_now)
    if (overlap(d.dst, d.bytes, held.dst, held.bytes) ||
        overlap(d.dst, d.bytes, held.word, held.word ? sizeof(std::uint64_t) : 0)) {
      overlaps = true;
      break;
    }
  if (ring_) {
    const bool starts = overlaps || run_.size() >= batch_limit_;
    if (starts) run_.clear();
    run_.push_back(d);
    batch_.push_back(d);
    batch_flags_.push_back(starts ? platform::kAgentStartsBatch : 0);
    if (batch_.size() >= platform::kAgentBatch) flush();
    return true;
  }
  if (overlaps) flush();
  batch_.push_back(d);
  if (batch_.size() >= batch_limit_) flush();
  return true;
}

void Staging::flush() {
  if (batch_.empty()) return;
  if (ring_) {
    publish();
    return;
  }
  if (batch_.size() == 1)
    backend_.deliver(batch_.front(), stream(0));
  else
    backend_.deliver_batch(batch_.data(), batch_.size(), stream(0));
  batch_.clear();
}

void Staging::publish() {
  for (std::size_t k = 0; k < batch_.size(); ++k) {
    // Room in the ring (a stopped agent left it empty: only a running one lets it fill). The
    // agent's `head` is read again only when the last value read leaves no room: it is a line
    // the GPU writes, so each read on the way to 5 M entries/s would be a cache miss.
    if (agent_tail_ - agent_head_ >= platform::kAgentSlots &&
        !await_progress(
            [&] { return agent_head_ = dev::atomic_load(&ring_->head, dev::Order::Acquire); },
            [&](std::uint64_t head) { return agent_tail_ - head < platform::kAgentSlots; },
            Deadline::no_progress_for(kAgentStallSeconds)))
      fail(ErrorClass::Timeout,
           "proxy: the GPU's delivery agent took no delivery for %d s (is the GPU running it? a "
           "kernel that fills the GPU before the first delivery leaves it no room)",
           kAgentStallSeconds);
    const platform::Delivery& x = batch_[k];
    platform::AgentEntry& e = ring_->entries[agent_tail_ % platform::kAgentSlots];
    e.dst = x.dst;
    e.src = x.src;
    e.word = x.word;
    e.operand = x.operand;
    e.mark = x.mark;
    e.after = stream_mark_;
    e.bytes = static_cast<std::uint32_t>(x.bytes);
    e.op = static_cast<std::uint16_t>(x.op);
    e.flags = batch_flags_[k];
    ++agent_tail_;
  }
  agent_mark_ = batch_.back().mark;
  batch_.clear();
  batch_flags_.clear();
  dev::atomic_store(&ring_->tail, agent_tail_, dev::Order::Release);
  agent_used_ = std::chrono::steady_clock::now();
  if (!agent_running_) {
    backend_.start_delivery_agent(ring_, agent_scratch_, agent_stream());
    agent_running_ = true;
  }
}

std::uint64_t Staging::word_atomic(void* word, unsigned width, platform::WordOp op,
                                   std::uint64_t operand, std::uint64_t expected) {
  if (direct_)
    return platform::apply_word_op(word, width, op, operand, expected, dev::Order::AcqRel);
  flush();
  // The kernel below runs on stream(0): what the agent holds lands first.
  if (ring_ && !await_agent(agent_mark_, Deadline::no_progress_for(kAgentStallSeconds)))
    fail(ErrorClass::Timeout,
         "proxy: the GPU's delivery agent applied no delivery for %d s before a remote "
         "atomic",
         kAgentStallSeconds);
  backend_.word_atomic(word, width, op, operand, expected, old_, stream(0));
  backend_.stream_synchronize(stream(0));
  return dev::atomic_load(old_, dev::Order::Acquire);
}

}  // namespace gnio::proxy
