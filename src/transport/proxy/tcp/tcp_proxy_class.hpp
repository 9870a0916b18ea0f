// TcpProxy, the class behind make_tcp_proxy() (tcp_proxy.hpp describes the design). Private to
// src/transport/proxy/tcp/, whose files define its members: tcp_proxy.cpp (construction, the
// receiving threads, the lanes past the first) and tcp_sender.cpp (the sender thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/status.hpp"
#include "platform/backend.hpp"
#include "transport/net/tcp/socket_reader.hpp"
#include "transport/net/tcp/tcp_mesh.hpp"
#include "transport/proxy/open_requests.hpp"
#include "transport/proxy/proxy.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/staging.hpp"

namespace gnio::proxy {

/// The proxy of one communicator over TCP.
class TcpProxy final : public Proxy {
 public:
  /// Collective over every rank (connects the mesh).
  explicit TcpProxy(const ProxyArgs& args);
  /// Says goodbye to every peer and stops the threads. Call after the final barrier (every rank
  /// drained), so no peer takes the closed connections for a failure.
  ~TcpProxy() override;

 private:
  /// The sender thread (tcp_sender.cpp): descriptors out, acks and replies, the ring's counters.
  class Sender;
  void send_loop();
  /// Receives on lane `lane` of every peer until stop (connected at creation: or until each
  /// said goodbye); lane 0's thread also accepts the connections peers open on first use.
  void receive_loop(int lane);
  /// Sends the frames handed to lane `lane` (> 0).
  void lane_send_loop(int lane);
  /// Reads and applies one frame from `peer` on lane `lane`; false when the connection ended or
  /// was rejected.
  bool receive_frame(int peer, int lane);
  /// The lane (> 0) of a landing frame that signals `sig_offset`: one pipe's frames share it.
  int lane_of(std::uint64_t sig_offset) const;
  /// Index of (peer, lane) in the per-connection arrays (the mesh's layout).
  std::size_t at(int peer, int lane) const { return mesh_.connection(peer, lane); }
  /// Appends to `known` the connections receiving threads applied a first frame from since it
  /// was last called with it (the sender's list of connections it owes acks on).
  void take_receiving_on(std::vector<std::size_t>& known);
  /// Writes `head_bytes` of `head` (a frame, or frames gathered with their data) and then `bytes`
  /// of `data` (read through `staging`) to connection `lane` of `peer`, between the releases
  /// receivers acquire (frames_sending_ before, frames_sent_ after); a failure fails the
  /// transport naming the peer, unless the proxy is stopping. False on failure.
  bool transmit(int peer, int lane, Staging& staging, const void* head, std::size_t head_bytes,
                const void* data, std::size_t bytes);
  /// True when descriptor `d` is a heap put that goes out striped over the lanes past the first
  /// (GNIO_NET_STRIPE_MIN bytes or more, its source read through staging, the peer owing this
  /// rank no answer: `unanswered`).
  bool striping(const ProxyDesc& d, std::uint32_t unanswered) const;
  /// Wakes the sender from its idle wait: the receiver queued something for it (a reply, an
  /// answered request, an ack to send or one received).
  void nudge_sender();
  /// Applies an Atomic frame to this rank's heap; returns the old value (zero-extended).
  std::uint64_t apply_atomic(const Frame& f);
  /// Connections on first use: reads what arrived on this rank's sending socket `c` (a goodbye,
  /// `have` of its bytes in `bye` so far); true when the watch is over: the peer said goodbye,
  /// or closed the socket without one (the transport fails, naming it, unless stopping).
  bool sending_socket_closed(const net::TcpMesh::Accepted& c, Frame* bye, std::size_t* have);
  /// Counts the frames received on lane `lane` whose deliveries completed as applied (the sender
  /// acks them), in arrival order.
  void settle_deliveries(int lane);
  /// A Staging of this proxy's kind (direct or through bounce buffers) for one thread.
  std::unique_ptr<Staging> staging_for(Staging::Direction direction) const;
  using Clock = std::chrono::steady_clock;
  /// A put from `peer` whose delivery (data, signal) completes at `mark` (Staging::completed()),
  /// queued at `queued` (GNIO_PROXY_STATS).
  struct Delivering {
    std::uint64_t mark;
    int peer;
    Clock::time_point queued;
  };
  /// One stage's durations (GNIO_PROXY_STATS: printed per connection when the proxy ends;
  /// sending: descriptor seen -> frame and data handed to the socket; receiving: header read ->
  /// data read and its delivery queued; delivering: queued -> data and signal in place): count,
  /// sum, largest.
  struct StageTime {
    std::uint64_t n = 0, total_ns = 0, max_ns = 0;
    void add(Clock::duration d);
    std::string describe(const char* name) const;
  };
  /// A frame the sender handed to a lane (> 0): data that stays valid until the lane says it was
  /// sent: host memory (an outbox, the ring slot's inline buffer) or, `staged`, a piece of a
  /// striped put's source, which the lane reads through its own staging.
  struct LaneFrame {
    int peer;
    Frame frame;
    const void* data;
    std::uint64_t bytes;
    bool staged;
    Clock::time_point seen;
  };
  /// Connection `lane` to every peer. Lane 0's sending and receiving threads are sender_ and
  /// receiver_; every other lane has its own (`sender`, `receiver`), fed through `queue`.
  struct Lane {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<LaneFrame> queue;
    std::atomic<std::uint64_t> queued{0};  ///< frames handed (written under `mutex`)
    std::atomic<std::uint64_t> sent{0};    ///< frames sent (or dropped after a failure)
    /// The sending thread's staging (lanes > 0: made at their first striped piece).
    std::unique_ptr<Staging> outbound;
    /// The receiving thread's staging (lanes > 0: made at their first striped piece) and the
    /// frames received, not yet in place, in arrival (= ack) order.
    std::unique_ptr<Staging> inbound;
    std::deque<Delivering> delivering;
    StageTime send_time, receive_time, deliver_time;  ///< GNIO_PROXY_STATS
    /// Lanes past the first, connections on first use: peers whose connection lane 0's
    /// receiving thread accepted for this lane (written under `mutex`), and its wake-up.
    std::vector<int> arrived;
    bootstrap::Waker arrivals;
    std::thread sender, receiver;
  };
  /// A reply this rank owes a peer: the frame (a GetReply's data is read when it is sent).
  struct Reply {
    int peer;
    Frame frame;
  };

  net::TcpMesh mesh_;
  // How the threads reach this rank's memory (Staging's `direct`, GNIO_PROXY_CHUNK), and the
  // smallest heap put spread over the lanes (GNIO_NET_STRIPE_MIN).
  bool direct_ = false;
  std::size_t chunk_ = 0;
  std::uint64_t stripe_min_ = 0;
  // Connections per peer (GNIO_NET_NSOCKS), one Lane each.
  int lanes_ = 1;
  std::vector<std::unique_ptr<Lane>> lane_;
  // Per connection (at(peer, lane)): operations the receiver applied from it (the sender turns
  // them into acks), the peer's acks of our operations, and whether the peer said goodbye.
  std::unique_ptr<std::atomic<std::uint64_t>[]> applied_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> peer_acked_;
  std::unique_ptr<std::atomic<bool>[]> said_bye_;
  // Connections from which this rank applied a frame, in the order the receiving threads first
  // did (the sender owes their acks; it reads the list from where it last stopped).
  std::mutex receiving_mutex_;
  std::vector<std::size_t> receiving_on_;
  std::atomic<std::size_t> receiving_count_{0};
  // Per connection: the buffered reader its receiving thread reads every frame through.
  std::vector<std::unique_ptr<net::SocketReader>> readers_;
  // This rank's gets and atomics (part 0 of their ticket; `where`: a get's destination, an
  // atomic's nonzero when its old value is wanted): the sender opens them before sending, the
  // receiver takes each on its reply and says when it was answered.
  OpenRequests requests_;
  // Replies the receiver queued for the sender.
  std::mutex replies_mutex_;
  std::vector<Reply> replies_;
  // Set (before the doorbell rings) when another thread has work for the sender.
  std::atomic<bool> nudged_{false};
  /// Frames the sender thread has begun to send (released before each send, acquired by the
  /// receiver before it applies a frame; see send_loop).
  std::atomic<std::uint64_t> frames_sending_{0};
  /// Frames any sending thread has sent (released after each send, once its source was read;
  /// acquired by every receiving thread before it applies a frame): a peer's answer to a frame
  /// (a collective's consumption signal) may let device code here overwrite that frame's source
  /// (an outbox sub-slot), which the receiving thread's release of the signal then follows.
  std::atomic<std::uint64_t> frames_sent_{0};
  std::thread sender_;
  std::thread receiver_;
};

}  // namespace gnio::proxy
