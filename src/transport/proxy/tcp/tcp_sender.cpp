// The tcp proxy's sender thread: it takes descriptors from the command ring, sends their frames
// (small ones gathered per peer, large heap puts striped over the lanes past the first), moves
// the ring's head as frames leave and its done counter as the peer acknowledges them, sends the
// acks and replies this rank owes, and waits briefly when there is nothing to do. One turn of
// its loop is the steps below, in this order.
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/device/atomic.hpp"
#include "transport/proxy/idle_policy.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/ring_cursor.hpp"
#include "transport/proxy/tcp/tcp_proxy_class.hpp"
#include "transport/proxy/ticket_ledger.hpp"

namespace gnio::proxy {
namespace {

/// Descriptors the sender takes from the ring before it sends what it gathered, acks and replies.
constexpr int kDescriptorsPerTurn = 64;
/// Frames with at most this much data that the sender reads directly are gathered per peer and
/// written together (one system call for a burst of small puts, signals, acks and replies) ...
constexpr std::size_t kGatherMaxData = 4096;
/// ... until this many bytes wait.
constexpr std::size_t kGatherBytes = std::size_t{64} << 10;
/// Striped puts in flight at once (their pieces queued on the lanes, not yet all in place).
constexpr std::size_t kMaxStriped = 16;

}  // namespace

class TcpProxy::Sender {
 public:
  explicit Sender(TcpProxy& proxy);
  /// Runs until the proxy stops, then says goodbye to every peer (unless the transport failed).
  void run();

 private:
  // ---- one turn's steps (each returns true when it did something) ----
  /// Striped puts whose pieces are all in place at the target, oldest first, retire: a
  /// put_signal's signal goes out on lane 0 then.
  bool finish_striped();
  /// Takes up to kDescriptorsPerTurn descriptors from the ring and sends or hands out their
  /// frames.
  bool take_descriptors();
  /// Whether the descriptor in `slot` may be taken now; `stripe`: it is a put to be striped.
  bool may_take(const ProxyDesc& slot, bool stripe) const;
  /// Sends (or hands to lanes) the frame(s) of the descriptor in `slot`, ticket cursor_.next().
  void take(const ProxyDesc& slot, Clock::time_point seen, bool stripe);
  /// The head passes every ticket whose frame was sent, in order.
  bool advance_head();
  /// Sends the acks this rank owes each connection and counts the acks it received.
  bool exchange_acks();
  /// Sends the replies this rank owes (a get's data read from the heap now) and retires its own
  /// requests that were answered.
  bool send_replies();
  /// Publishes the done counter past every ticket that owes nothing more (and whose frames left:
  /// done never passes head).
  void retire_done();
  /// Waits as idle_ says; its sleep also ends when another thread nudges this one.
  void wait_for_work(bool busy);

  // ---- sending ----
  /// Writes what is gathered for `peer`.
  bool flush(int peer);
  /// Sends frame `f` and `bytes` of `data` to `peer` on lane 0: gathered when this thread reads
  /// the data itself (`host_data`: host memory it reads directly, such as a slot's inline buffer),
  /// else after what is gathered for that peer (one connection, one order).
  bool send_frame(int peer, const Frame& f, const void* data, std::size_t bytes,
                  bool host_data = false);
  /// GNIO_NET_CUT_AFTER: sends the frame and part of its data, then breaks the link.
  bool cut_link(int peer, Staging& staging, const Frame& f, const void* data);

  /// A frame handed to lane `lane` (> 0) as its frame `seq`: sent once the lane's count passes
  /// it.
  struct Handed {
    int lane = 0;
    std::uint64_t seq = 0;
  };
  /// What a ticket taken from the ring still waits for: the acks (or the answer) of its frames
  /// (`owed`; done at 0; a frame that could not be sent leaves it owing forever, so that quiet()
  /// ends on the abort) and the sending of the frames it handed to lanes (its slot and source
  /// are in use until then): one in `handed` (lane 0: none), a striped put's others in `more`.
  struct Ticket {
    std::uint32_t owed = 1;
    Handed handed;
    std::vector<Handed> more;
  };
  /// Hands `frame` (with `n` bytes of `src`) to lane `lane` for `peer`; what says when it was
  /// sent.
  Handed hand(int lane, int peer, const Frame& frame, const void* src, std::uint64_t n, bool staged,
              Clock::time_point seen);
  /// True once the lane a frame was handed to sent it (always for lane 0's own frames).
  bool sent(const Handed& h) const {
    return h.lane == 0 ||
           p_.lane_[static_cast<std::size_t>(h.lane)]->sent.load(std::memory_order_acquire) > h.seq;
  }

  TcpProxy& p_;
  const std::uint64_t mask_;
  const std::vector<int>& peers_;
  Staging direct_staging_;
  /// Tickets awaiting the peer's ack on connection `c` (made at its first frame).
  std::deque<std::uint64_t>& in_flight(std::size_t c);
  /// True when no ticket awaits an ack on connection `c`.
  bool none_in_flight(std::size_t c) const { return !in_flight_[c] || in_flight_[c]->empty(); }

  std::vector<std::uint64_t> acks_sent_, acks_seen_;  // per connection
  // Tickets per connection (at(peer, lane)) awaiting the peer's ack, made at the connection's
  // first frame (an empty deque holds ~600 bytes; most connections of a large job never carry
  // one), and the connections that have one: the per-turn work follows the peers this rank
  // talks to, not the job's size.
  std::vector<std::unique_ptr<std::deque<std::uint64_t>>> in_flight_;
  std::vector<std::size_t> sending_on_;
  // Connections whose frames this rank applied (which it owes acks), as the receiving threads
  // reported them (TcpProxy::receiving_on_).
  std::vector<std::size_t> receiving_on_;
  TicketLedger<Ticket> tickets_;
  // A heap put of at least GNIO_NET_STRIPE_MIN bytes goes out in pieces, one per lane past the
  // first, sent in parallel by their threads. Later striped puts may follow before its pieces
  // are in place (each lane sends its pieces in ticket order), unless they write bytes it
  // writes or a fence() lies between them; any other descriptor waits until every striped put
  // before it is in place, so it keeps its place in the order of everything this rank sends
  // (what fence(), signal() and put_signal rely on). A put_signal's signal follows on lane 0
  // once its pieces and those of every striped put before it are in place.
  struct Striped {
    int peer;
    std::uint64_t ticket;
    std::uint64_t begin, end;  // heap bytes it writes at the target
    bool signal;
    Frame signal_frame;
  };
  std::deque<Striped> striped_;  // in ticket order
  // Gets and atomics of this rank not yet answered, per peer: a put is not
  // striped to a peer that still owes an answer, because the target could apply the pieces
  // (received on other lanes) before it reads or updates what the request names.
  std::vector<std::uint32_t> unanswered_;
  RingCursor cursor_;
  IdlePolicy idle_;
  // Fault injection (GNIO_NET_CUT_AFTER): data bytes sent to each peer so far.
  const std::uint64_t cut_after_;
  std::vector<std::uint64_t> data_sent_;
  // Fault injection (GNIO_NET_BAD_REPLY): replies name a ticket the asker never used.
  const std::uint64_t bad_reply_;
  // Small frames gathered per peer (lane 0), written together by flush(), and the peers that
  // had some gathered this turn (each may appear more than once).
  std::vector<std::vector<char>> gathered_;
  std::vector<int> gathered_for_;
};

TcpProxy::Sender::Sender(TcpProxy& proxy)
    : p_(proxy),
      mask_(proxy.handle_.capacity - 1),
      peers_(proxy.mesh_.peers()),
      direct_staging_(proxy.backend_, Staging::Direction::Outbound, true, 0),
      acks_sent_(proxy.mesh_.connections(), 0),
      acks_seen_(proxy.mesh_.connections(), 0),
      in_flight_(proxy.mesh_.connections()),
      unanswered_(static_cast<std::size_t>(proxy.size_), 0),
      cursor_(proxy.handle_),
      idle_(proxy.spin()),
      cut_after_(config_size("GNIO_NET_CUT_AFTER")),
      data_sent_(static_cast<std::size_t>(proxy.size_), 0),
      bad_reply_(config_bool("GNIO_NET_BAD_REPLY") ? std::uint64_t{1} << 62 : 0),
      gathered_(static_cast<std::size_t>(proxy.size_)) {}

void TcpProxy::send_loop() {
  Sender(*this).run();
}

void TcpProxy::Sender::run() {
  while (!p_.stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    if (!p_.failed()) {
      busy |= finish_striped();
      busy |= take_descriptors();
      busy |= advance_head();
      busy |= exchange_acks();
      busy |= send_replies();
      retire_done();
      // What was gathered this turn goes out now: one write per peer.
      for (int peer : gathered_for_) (void)flush(peer);
      gathered_for_.clear();
    }
    cursor_.end_turn();
    wait_for_work(busy);
  }
  if (!p_.failed()) {
    for (int peer : peers_) {
      // Flushed first: what is gathered may open the connection the goodbye then closes.
      if (!flush(peer) || !p_.mesh_.sending_to(peer, 0)) continue;
      if (send_frame(peer, bye_frame(p_.token_), nullptr, 0)) (void)flush(peer);
    }
  }
}

bool TcpProxy::Sender::finish_striped() {
  bool busy = false;
  // Oldest first: a signal goes out only once every striped put before it is in place too (a
  // peer that sees it sees them), and it leaves before any later one's.
  while (!striped_.empty()) {
    const Striped& s = striped_.front();
    const std::uint32_t left = s.ticket < tickets_.done() ? 0 : tickets_[s.ticket].owed;
    if (left > (s.signal ? 1u : 0u)) break;
    if (s.signal && send_frame(s.peer, s.signal_frame, nullptr, 0))
      in_flight(p_.at(s.peer, 0)).push_back(s.ticket);
    striped_.pop_front();
    busy = true;
  }
  return busy;
}

bool TcpProxy::Sender::may_take(const ProxyDesc& slot, bool stripe) const {
  // A striped put waits until this rank's earlier frames to that peer on lane 0 were applied
  // there (acked): its pieces travel on the other connections and would otherwise overtake them.
  if (stripe && !none_in_flight(p_.at(slot.peer, 0))) return false;
  if (striped_.empty()) return true;
  // Anything but a striped put waits for the striped puts before it, and so does one past the
  // limit or past a fence() made after the oldest was posted.
  if (!stripe || striped_.size() == kMaxStriped ||
      striped_.front().ticket < dev::atomic_load(&p_.handle_.ring->fenced, dev::Order::Relaxed))
    return false;
  // Bytes two puts both write travel in ticket order only on one connection.
  const std::uint64_t begin = slot.dst_offset, end = slot.dst_offset + slot.bytes;
  return std::none_of(striped_.begin(), striped_.end(), [&](const Striped& s) {
    return s.peer == slot.peer && s.begin < end && begin < s.end;
  });
}

bool TcpProxy::Sender::take_descriptors() {
  bool busy = false;
  for (int taken = 0; taken < kDescriptorsPerTurn; ++taken) {
    const ProxyDesc* slot = cursor_.peek();
    if (!slot) break;
    const Clock::time_point seen = p_.stats() ? Clock::now() : Clock::time_point{};
    const int peer = slot->peer;
    const bool stripe = peer >= 0 && peer < p_.size_ &&
                        p_.striping(*slot, unanswered_[static_cast<std::size_t>(peer)]);
    if (!may_take(*slot, stripe)) break;
    take(*slot, seen, stripe);
    cursor_.advance();
    busy = true;
  }
  return busy;
}

TcpProxy::Sender::Handed TcpProxy::Sender::hand(int lane, int peer, const Frame& frame,
                                                const void* src, std::uint64_t n, bool staged,
                                                Clock::time_point seen) {
  Lane& ln = *p_.lane_[static_cast<std::size_t>(lane)];
  Handed h{lane, 0};
  {
    std::lock_guard<std::mutex> lock(ln.mutex);
    ln.queue.push_back(LaneFrame{peer, frame, src, n, staged, seen});
    h.seq = ln.queued.load(std::memory_order_relaxed);
    ln.queued.fetch_add(1, std::memory_order_release);
  }
  ln.wake.notify_one();
  in_flight(p_.at(peer, lane)).push_back(cursor_.next());
  return h;
}

void TcpProxy::Sender::take(const ProxyDesc& slot, Clock::time_point seen, bool stripe) {
  Ticket& ticket = tickets_.open();
  const int peer = slot.peer;
  const bool data = slot.op == static_cast<std::uint32_t>(ProxyOp::Put) ||
                    slot.op == static_cast<std::uint32_t>(ProxyOp::PutSignal);
  // Gets and atomics are done by their reply (which carries the ticket), not by acks.
  const bool get = slot.op == static_cast<std::uint32_t>(ProxyOp::Get);
  const bool request = get || slot.op == static_cast<std::uint32_t>(ProxyOp::Atomic);
  Frame f{kFrameMagic,
          slot.op,
          p_.token_,
          slot.dst_offset,
          slot.bytes,
          slot.sig_offset,
          slot.value,
          slot.sig_op,
          slot.flags >> kProxyRegionShift,
          request ? cursor_.next() : 0};
  // Data device code left in an outbox (host memory) is sent from there, once it is known to lie
  // inside one: the address comes from device code.
  const bool host_source = data && (slot.flags & kProxyHostSource) != 0;
  const bool inline_data =
      data && (slot.flags & kProxyInline) != 0 && slot.bytes <= kProxyInlineBytes;
  // Frames into landing regions go on their lane when their data is host memory (which a lane
  // thread reads directly; GPU memory needs this thread's staging).
  const int lane = f.region != 0 && p_.lanes_ > 1 && (!data || host_source || inline_data)
                       ? p_.lane_of(slot.sig_offset)
                       : 0;
  if (host_source && !p_.in_outbox(slot.src, slot.bytes)) {
    p_.fail_transport(format(
        "rank %d: proxy descriptor %llu sends %llu bytes from 0x%llx, which "
        "is not inside a landing outbox (internal error)",
        p_.rank_, static_cast<unsigned long long>(cursor_.next()),
        static_cast<unsigned long long>(slot.bytes), static_cast<unsigned long long>(slot.src)));
  } else if (!p_.mesh_.remote(peer)) {
    p_.fail_transport(
        format("rank %d: proxy descriptor %llu names rank %d, which is not a remote "
               "peer (internal error)",
               p_.rank_, static_cast<unsigned long long>(cursor_.next()), peer));
  } else {
    if (request)
      p_.requests_.open(
          cursor_.next(), 0,
          OpenRequest{peer, get ? RequestKind::Get : RequestKind::Update, get ? slot.bytes : 0,
                      get ? slot.src : std::uint64_t{(slot.flags & kProxyFetch) != 0}});
    const void* from = !data ? nullptr
                       : inline_data
                           ? p_.handle_.inline_data + (cursor_.next() & mask_) * kProxyInlineBytes
                           : reinterpret_cast<const void*>(slot.src);
    const std::uint64_t bytes = data ? slot.bytes : 0;
    if (stripe) {
      const std::uint64_t pieces = static_cast<std::uint64_t>(p_.lanes_ - 1);
      const std::uint64_t piece = ((bytes + pieces - 1) / pieces + 4095) & ~std::uint64_t{4095};
      std::uint32_t count = 0;
      for (std::uint64_t i = 0; i * piece < bytes; ++i) {
        Frame pf = f;
        pf.type = static_cast<std::uint32_t>(ProxyOp::Put);
        pf.dst_offset = f.dst_offset + i * piece;
        pf.bytes = std::min(piece, bytes - i * piece);
        pf.sig_offset = pf.value = 0;
        pf.sig_op = 0;
        const Handed h = hand(1 + static_cast<int>(i), peer, pf,
                              static_cast<const char*>(from) + i * piece, pf.bytes, true, seen);
        if (count++ == 0)
          ticket.handed = h;
        else
          ticket.more.push_back(h);
      }
      const bool signal = slot.op == static_cast<std::uint32_t>(ProxyOp::PutSignal);
      ticket.owed = count + (signal ? 1 : 0);
      striped_.push_back(
          Striped{peer, cursor_.next(), slot.dst_offset, slot.dst_offset + bytes, signal,
                  Frame{kFrameMagic, static_cast<std::uint32_t>(ProxyOp::Signal), p_.token_, 0, 0,
                        slot.sig_offset, slot.value, slot.sig_op, 0, 0}});
    } else if (lane > 0) {
      ticket.handed = hand(lane, peer, f, from, bytes, false, seen);
    } else {
      if (send_frame(peer, f, from, bytes, inline_data || host_source)) {
        if (!request) in_flight(p_.at(peer, 0)).push_back(cursor_.next());
        if (request) ++unanswered_[static_cast<std::size_t>(peer)];
      }
      if (p_.stats()) p_.lane_[0]->send_time.add(Clock::now() - seen);
    }
  }
}

bool TcpProxy::Sender::advance_head() {
  // Every ticket taken is consumed whether or not its frames could be sent: the source was read
  // (or never will be) and the slot is free, once the frames it handed to lanes were sent.
  if (!tickets_.pass_head([this](const Ticket& t) {
        return sent(t.handed) && std::all_of(t.more.begin(), t.more.end(),
                                             [this](const Handed& h) { return sent(h); });
      }))
    return false;
  p_.publish_head(tickets_.head());
  return true;
}

std::deque<std::uint64_t>& TcpProxy::Sender::in_flight(std::size_t c) {
  if (!in_flight_[c]) {
    in_flight_[c] = std::make_unique<std::deque<std::uint64_t>>();
    sending_on_.push_back(c);
  }
  return *in_flight_[c];
}

bool TcpProxy::Sender::exchange_acks() {
  bool busy = false;
  p_.take_receiving_on(receiving_on_);
  for (std::size_t c : receiving_on_) {
    const std::uint64_t applied = p_.applied_[c].load(std::memory_order_acquire);
    if (applied == acks_sent_[c]) continue;
    const int peer = p_.mesh_.peer_of(c), lane = p_.mesh_.lane_of(c);
    Frame ack{kFrameMagic, kFrameAck, p_.token_, 0, 0, 0, 0, 0, static_cast<std::uint32_t>(lane),
              applied};
    if (send_frame(peer, ack, nullptr, 0)) acks_sent_[c] = applied;
    busy = true;
  }
  for (std::size_t c : sending_on_) {
    std::deque<std::uint64_t>& tickets = *in_flight_[c];
    const std::uint64_t acked = p_.peer_acked_[c].load(std::memory_order_acquire);
    while (acks_seen_[c] < acked && !tickets.empty()) {
      --tickets_[tickets.front()].owed;
      tickets.pop_front();
      ++acks_seen_[c];
      busy = true;
    }
  }
  return busy;
}

bool TcpProxy::Sender::send_replies() {
  bool busy = false;
  std::vector<Reply> replies;
  {
    std::lock_guard<std::mutex> lock(p_.replies_mutex_);
    replies.swap(p_.replies_);
  }
  const std::vector<AnsweredRequest> answered = p_.requests_.answered();
  for (Reply& r : replies) {
    const bool get_reply = r.frame.type == kFrameGetReply;
    r.frame.count ^= bad_reply_;
    if (!send_frame(r.peer, r.frame, get_reply ? p_.heap_base_ + r.frame.dst_offset : nullptr,
                    get_reply ? r.frame.bytes : 0))
      break;
    busy = true;
  }
  for (const AnsweredRequest& a : answered) {
    --tickets_[a.ticket].owed;
    --unanswered_[static_cast<std::size_t>(a.peer)];
    busy = true;
  }
  return busy;
}

void TcpProxy::Sender::retire_done() {
  if (tickets_.retire([](const Ticket& t) { return t.owed == 0; }))
    p_.publish_done(tickets_.done());
}

void TcpProxy::Sender::wait_for_work(bool busy) {
  idle_.after_turn(
      busy, [] {},
      [this](std::chrono::microseconds poll) {
        // The other threads' work for this one (replies, answers, acks, lanes' sent frames)
        // rings the doorbell. A descriptor the last turn saw and left (blocked on acks) needs no
        // look.
        p_.sleep_until_rung(poll, -1, [this] {
          return p_.nudged_.load(std::memory_order_seq_cst) || cursor_.published_since_turn();
        });
      });
  p_.nudged_.store(false, std::memory_order_relaxed);
}

bool TcpProxy::Sender::flush(int peer) {
  std::vector<char>& g = gathered_[static_cast<std::size_t>(peer)];
  if (g.empty()) return true;
  const bool ok = p_.transmit(peer, 0, direct_staging_, g.data(), g.size(), nullptr, 0);
  g.clear();
  return ok;
}

bool TcpProxy::Sender::send_frame(int peer, const Frame& f, const void* data, std::size_t bytes,
                                  bool host_data) {
  // Gathered when this thread reads the data itself: copied now, so the source is free as if it
  // had been sent (the ring's head may pass it), and released with the batch.
  if (!cut_after_ && bytes <= kGatherMaxData && (bytes == 0 || host_data || p_.direct_)) {
    std::vector<char>& g = gathered_[static_cast<std::size_t>(peer)];
    if (g.empty()) gathered_for_.push_back(peer);
    if (g.capacity() < kGatherBytes + sizeof(Frame) + kGatherMaxData)
      g.reserve(kGatherBytes + sizeof(Frame) + kGatherMaxData);
    const char* head = reinterpret_cast<const char*>(&f);
    g.insert(g.end(), head, head + sizeof(f));
    if (bytes)
      g.insert(g.end(), static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    return g.size() < kGatherBytes || flush(peer);
  }
  // Anything else goes out after what is gathered for that peer (one connection, one order).
  if (!flush(peer)) return false;
  Staging& staging = host_data ? direct_staging_ : *p_.lane_[0]->outbound;
  if (cut_after_ && data_sent_[static_cast<std::size_t>(peer)] + bytes > cut_after_)
    return cut_link(peer, staging, f, data);
  data_sent_[static_cast<std::size_t>(peer)] += bytes;
  return p_.transmit(peer, 0, staging, &f, sizeof(f), data, bytes);
}

bool TcpProxy::Sender::cut_link(int peer, Staging& staging, const Frame& f, const void* data) {
  // The frame and part of its data go out, then the link breaks: the receiver must report the
  // loss and must not apply the operation.
  std::uint64_t& sent = data_sent_[static_cast<std::size_t>(peer)];
  const std::size_t part = static_cast<std::size_t>(cut_after_ - sent);
  int err = 0;
  const int fd = p_.mesh_.send_fd(peer, 0, &err);
  if (fd >= 0)
    (void)staging.send(fd, &f, sizeof(f), data, part, Deadline::no_progress_for(p_.timeout_s_),
                       &err);
  sent = cut_after_;
  // The failure is recorded before the socket goes down, so that this rank reports the cut rather
  // than its receiver thread's view of it (the connection closing).
  p_.fail_transport(
      format("rank %d: tcp transport: the link to rank %d was cut after %llu bytes "
             "of data (GNIO_NET_CUT_AFTER fault injection)",
             p_.rank_, peer, static_cast<unsigned long long>(cut_after_)));
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  return false;
}

}  // namespace gnio::proxy
