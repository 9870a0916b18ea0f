// The proxy transport's host side: the command ring device code posts to (gnio/device/
// proxy_ring.hpp) and the progress threads that carry its operations to ranks on other nodes
// over the tcp backend (transport/net/tcp/) and apply what those ranks send here.
//
// Two threads per communicator, so that neither can block the other: the sender drains the ring
// in ticket order, writes each operation as one frame (header + payload read straight from the
// source) to the target's connection, and writes the acknowledgements the receiver owes; the
// receiver only reads. With GNIO_NET_NSOCKS > 1 every peer has more connections ("lanes"), each
// with a sending and a receiving thread of its own: lane 0 carries the device API's operations,
// requests, replies and every ack (in order, so fence and quiet hold); the others carry the
// frames into landing regions (collectives' pipes), which the sender hands to the lane of their
// signal word, so that one pipe's messages stay in order while different pipes move in parallel.
// The ring's head (slot free, source read) passes a ticket only once its frame was sent, by
// whichever thread sent it. A receiver it validates every frame (magic, job token, byte range
// inside the region it names, aligned signal word) before writing a byte, applies data then signal,
// and counts what it applied. A frame names either this rank's symmetric heap (what the device API
// reaches) or one of the proxy's landing regions (host memory that collectives' pipes to other
// nodes use: written straight from the socket, signals with host atomics). Data for the heap goes
// through the receiving Staging's deliveries, which the thread queues without waiting; a put counts
// as applied (and is acked) once its delivery completed. Gets and atomics are requests: the
// target's receiver applies an atomic (or notes a get) and queues the reply, which its sender
// writes (a get's data read from the heap then); the requester's receiver accepts a reply only for
// a request of its own that is still open (same peer, same size), writes the data or old value
// where the device asked, and the request's ticket is done. A frame that fails validation is an
// error: nothing of it is written, the connection is closed and the communicator aborts (as does
// the sender's side once it sees the connection end). Every byte and word of this rank's memory is
// moved through a Staging (staging.hpp): directly on the host backend, through page-locked bounce
// buffers and a one-thread kernel for signals and atomics on GPUs.
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
#include <unordered_map>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/status.hpp"
#include "platform/backend.hpp"
#include "transport/net/tcp/tcp_mesh.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/staging.hpp"

namespace gnio::proxy {

/// The proxy of one communicator.
class Proxy {
 public:
  /// Collective over every rank (connects the mesh). `heap_base` is this rank's symmetric heap;
  /// `control` receives the abort word when the transport fails; `stream` (the owner's) carries
  /// the proxy's setup and drain() reads of device memory. `on_link_lost(peer)` is called
  /// (from a proxy thread) when the transport fails because the connection to `peer` ended
  /// without a goodbye or a send to it failed, before the generic abort: the owner records
  /// `peer` as the rank whose loss aborts the device side (waits return RemoteError naming it).
  Proxy(platform::Backend& backend, Bootstrap& bootstrap, const std::vector<int>& node_of_rank,
        char* heap_base, std::uint64_t heap_bytes, DeviceControl* control, StreamRef stream,
        double timeout_s, std::function<void(int)> on_link_lost);
  /// Says goodbye to every peer, stops the threads and frees the ring. Call after the final
  /// barrier (every rank drained), so no peer takes the closed connections for a failure.
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// What device code posts through (DeviceComm::proxy_).
  ProxyHandle handle() const { return handle_; }
  /// A landing region (see kProxyRegionShift): `inbox` is written by peers' frames that name
  /// region `id` and read by device code here; `outbox` is where device code here writes
  /// messages this proxy sends from directly (kProxyHostSource). Host-mapped, zero-filled.
  struct Landing {
    std::uint32_t id = 0;
    char* inbox = nullptr;
    std::uint64_t inbox_bytes = 0;
    char* outbox = nullptr;
    std::uint64_t outbox_bytes = 0;
  };
  /// Adds landing region number (regions so far + 1). Every rank must add the same regions in the
  /// same order (their ids name them on the wire): call it from collective setup code. Throws
  /// Error(Unsupported) past kMaxLandings regions.
  Landing add_landing(std::uint64_t inbox_bytes, std::uint64_t outbox_bytes);

  /// Tells the receiver how many heap bytes are mapped now (after the heap grew).
  void set_heap_bytes(std::uint64_t bytes) { heap_bytes_.store(bytes, std::memory_order_release); }
  /// Waits (up to the timeout) until every posted operation was applied at its target. False
  /// only on timeout: once the communicator aborted or the transport failed nothing more will
  /// complete, and it returns true at once.
  bool drain();
  /// Throws Error(RemoteError) describing the transport failure, if one happened.
  void check() const;
  /// True once the transport failed.
  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  void send_loop();
  /// Receives on lane `lane` of every peer until each said goodbye (or stop).
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
  /// Writes `frame` and `bytes` of `data` (read through `staging`) to connection `lane` of
  /// `peer`, between the releases receivers acquire (frames_sending_ before, frames_sent_ after);
  /// a failure fails the transport naming the peer, unless the proxy is stopping. False on
  /// failure.
  bool transmit(int peer, int lane, Staging& staging, const Frame& frame, const void* data,
                std::size_t bytes);
  /// Waits until the sender has sent every reply this receiver queued for `peer` (a get's data is
  /// read from the heap while it is sent): the asker may have sent the frame at hand after it
  /// received such a reply, and that frame may write what the reply read. False when the
  /// transport failed or is stopping.
  bool await_replies_sent(int peer);
  /// Wakes the sender from its idle wait: the receiver queued something for it (a reply, an
  /// answered request, an ack to send or one received).
  void nudge_sender();
  /// Records the first failure, aborts device waits (naming `lost_peer` through on_link_lost when
  /// the failure is the loss of that peer's link); later ones are only logged.
  void fail_transport(const std::string& what, int lost_peer = -1);
  /// Applies an Atomic frame to this rank's heap; returns the old value (zero-extended).
  std::uint64_t apply_atomic(const Frame& f);
  /// Counts the frames received on lane `lane` whose deliveries completed as applied (the sender
  /// acks them), in arrival order.
  void settle_deliveries(int lane);
  /// A Staging of this proxy's kind (direct or through bounce buffers) for one thread.
  std::unique_ptr<Staging> staging_for(Staging::Direction direction) const;
  /// Hands a fetching atomic's old value to the device thread waiting in result slot `ticket`
  /// (waiting, up to the timeout, until that slot's previous user freed it). False on timeout.
  bool deliver_result(std::uint64_t ticket, std::uint64_t value);
  /// Runs a proxy thread's loop; an exception (a failed copy on the GPU) fails the transport.
  void run_guarded(const char* thread, const std::function<void()>& loop);
  /// Takes the open request `ticket` if `peer` owes its reply and it is a get (of `bytes`) or an
  /// atomic as `get` says; false (nothing taken) otherwise.
  bool take_request(std::uint64_t ticket, int peer, bool get, std::uint64_t bytes,
                    std::uint64_t* addr);

  /// A get or atomic of this rank waiting for its reply.
  struct Request {
    int peer;
    bool get;
    std::uint64_t addr;   ///< get: where the data goes; atomic: nonzero if the old value is wanted
    std::uint64_t bytes;  ///< get: data bytes
  };
  using Clock = std::chrono::steady_clock;
  /// A put from `peer` whose delivery (data, signal) completes at `mark` (Staging::completed()),
  /// queued at `queued` (GNIO_PROXY_STATS).
  struct Delivering {
    std::uint64_t mark;
    int peer;
    Clock::time_point queued;
  };
  /// One stage's durations (GNIO_PROXY_STATS): count, sum, largest.
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
    std::thread sender, receiver;
  };
  /// A reply this rank owes a peer: the frame (a GetReply's data is read when it is sent).
  struct Reply {
    int peer;
    Frame frame;
  };

  /// Landing region `id`, or null when there is none such (yet).
  const Landing* landing(std::uint32_t id) const;
  /// True when [src, src + bytes) lies inside one landing region's outbox.
  bool in_outbox(std::uint64_t src, std::uint64_t bytes) const;

  static constexpr std::uint32_t kMaxLandings = 64;

  platform::Backend& backend_;
  net::TcpMesh mesh_;
  int rank_;
  int size_;
  std::uint64_t token_;
  char* heap_base_;
  std::atomic<std::uint64_t> heap_bytes_;
  DeviceControl* control_;
  std::function<void(int)> on_link_lost_;
  double timeout_s_;
  StreamRef stream_;
  void* ring_memory_ = nullptr;  // host-mapped: ProxyRing, slots, results
  ProxyHandle handle_{};         // handle_.tail: device memory
  ProxyRing* ring_ = nullptr;
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
  // Landing regions: entries [0, landing_count_) are complete (written before the count is
  // released; only add_landing writes, under landing_mutex_).
  std::mutex landing_mutex_;
  Landing landings_[kMaxLandings];
  void* landing_memory_[kMaxLandings] = {};
  std::atomic<std::uint32_t> landing_count_{0};
  // How long the threads poll after their last work before they sleep (GNIO_PROXY_SPIN_US).
  std::chrono::microseconds spin_{0};
  // GNIO_PROXY_STATS: where a frame's time goes, per connection (Lane), printed when the proxy
  // ends. Sending: descriptor seen -> frame (and data) handed to the socket. Receiving: header
  // read -> data read and its delivery queued; delivery queued -> data and signal in place.
  bool stats_ = false;
  // Requests by ticket (sender inserts before sending, receiver takes on the reply) and the
  // tickets answered since the sender last looked.
  std::mutex requests_mutex_;
  std::unordered_map<std::uint64_t, Request> requests_;
  std::vector<std::uint64_t> answered_;
  // Replies the receiver queued for the sender.
  std::mutex replies_mutex_;
  std::vector<Reply> replies_;
  // Per peer: replies queued for it (receiver thread only) and sent to it (by the sender).
  std::vector<std::uint64_t> replies_queued_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> replies_sent_;
  // The sender's idle wait (the device side cannot notify; the receiver can).
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool wake_pending_ = false;
  /// Frames the sender thread has begun to send (released before each send, acquired by the
  /// receiver before it applies a frame; see send_loop).
  std::atomic<std::uint64_t> frames_sending_{0};
  /// Frames any sending thread has sent (released after each send, once its source was read;
  /// acquired by every receiving thread before it applies a frame): a peer's answer to a frame
  /// (a collective's consumption signal) may let device code here overwrite that frame's source
  /// (an outbox sub-slot), which the receiving thread's release of the signal then follows.
  std::atomic<std::uint64_t> frames_sent_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex error_mutex_;
  std::string error_;
  std::thread sender_;
  std::thread receiver_;
};

}  // namespace gnio::proxy
