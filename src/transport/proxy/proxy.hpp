// The proxy transport's host side, whatever network carries it: the command ring device code
// posts to (gnio/device/proxy_ring.hpp), the landing regions collectives' pipes to other nodes
// use, and the failure and completion bookkeeping every network backend shares. A backend
// (tcp/: framed messages over TCP sockets; ucx/: one-sided UCX RMA, each in a folder) derives
// from Proxy, runs the threads that drain the ring in ticket order, and moves `head` (slot free,
// source read) and `done` (applied at the target: what quiet() waits for) as its operations
// progress. Whatever the backend, the device API's promises hold through it: the operations to
// one peer take effect in the order they were posted (fence() needs nothing more), a signal is
// visible only after its data, and quiet() returns once everything posted before was applied.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/status.hpp"
#include "platform/backend.hpp"

namespace gnio::proxy {

/// What every proxy is made with, whatever its network. `heap_base` is this rank's symmetric heap
/// (`heap_bytes` of it mapped); `control` receives the abort word when the transport fails;
/// `stream` (the owner's) carries setup and drain()'s reads of device memory; `on_link_lost(peer)`
/// is called (from a proxy thread) when the transport fails because the link to `peer` ended or
/// failed, before the generic abort: the owner records `peer` as the rank whose loss aborts the
/// device side (waits return RemoteError naming it).
struct ProxyArgs {
  platform::Backend& backend;
  Bootstrap& bootstrap;
  const std::vector<int>& node_of_rank;  ///< rank r's node
  char* heap_base;
  std::uint64_t heap_bytes;
  DeviceControl* control;
  StreamRef stream;
  double timeout_s;
  std::function<void(int)> on_link_lost;
};

/// The proxy of one communicator: what the rest of the library sees of it. Made by make_proxy().
class Proxy {
 public:
  /// Stops nothing itself: a backend stops its threads in its own destructor (before this runs,
  /// so none of them sees the ring freed), then this frees the ring and the landing regions.
  virtual ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// What device code posts through (DeviceComm::proxy_).
  ProxyHandle handle() const { return handle_; }
  /// A landing region (see kProxyRegionShift): `inbox` is written by peers' operations that name
  /// region `id` and read by device code here; `outbox` is where device code here writes
  /// messages this proxy sends from directly (kProxyHostSource). Host-mapped, zero-filled.
  struct Landing {
    std::uint32_t id = 0;
    char* inbox = nullptr;
    std::uint64_t inbox_bytes = 0;
    char* outbox = nullptr;
    std::uint64_t outbox_bytes = 0;
  };
  /// Adds landing region number (regions so far + 1). Collective: every rank adds the same
  /// regions in the same order (their ids name them on the wire; a backend may exchange what
  /// peers need to reach the inbox). Throws Error(Unsupported) past kMaxLandings regions.
  Landing add_landing(std::uint64_t inbox_bytes, std::uint64_t outbox_bytes);
  /// Tells the proxy how many heap bytes are mapped now (after the heap grew). Collective: every
  /// rank calls it after the same allocation (a backend may register the new part with its
  /// network and exchange what peers need to reach it).
  virtual void set_heap_bytes(std::uint64_t bytes) {
    heap_bytes_.store(bytes, std::memory_order_release);
  }
  /// Waits (up to the timeout) until every posted operation was applied at its target. False
  /// only on timeout: once the communicator aborted or the transport failed nothing more will
  /// complete, and it returns true at once.
  bool drain();
  /// Throws Error(RemoteError) describing the transport failure, if one happened.
  void check() const;
  /// True once the transport failed.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// The first failure's description, and the peer whose lost link it was (-1: none).
  std::string failure() const;
  int failed_peer() const;

 protected:
  /// Allocates the ring (collective only through what the backend's constructor adds).
  explicit Proxy(const ProxyArgs& args);

  /// Called by add_landing() with the new region, on the calling (collective) thread.
  virtual void landing_added(const Landing& /*region*/) {}
  /// Landing region `id`, or null when there is none such (yet).
  const Landing* landing(std::uint32_t id) const;
  /// True when [src, src + bytes) lies inside one landing region's outbox.
  bool in_outbox(std::uint64_t src, std::uint64_t bytes) const;
  /// Records the first failure, aborts device waits (naming `lost_peer` through on_link_lost when
  /// the failure is the loss of that peer's link); later ones are only logged.
  void fail_transport(const std::string& what, int lost_peer = -1);
  /// Hands a fetching atomic's old value to the device thread waiting in result slot `ticket`
  /// (waiting, up to the timeout, until that slot's previous user freed it). False when the
  /// transport failed or is stopping, or on timeout, which fails the transport saying so.
  bool deliver_result(std::uint64_t ticket, std::uint64_t value);
  /// Runs a proxy thread's loop; an exception (a failed copy on the GPU) fails the transport.
  void run_guarded(const char* thread, const std::function<void()>& loop);
  /// Publishes the ring's counters (only the thread that drains the ring calls these).
  void publish_head(std::uint64_t head);
  void publish_done(std::uint64_t done);
  /// The sleep of the thread that takes descriptors when its IdlePolicy says so (idle_policy.hpp),
  /// the same for every transport: it announces the sleep on the ring, then, unless `ready()` (work
  /// that came before the announcement: a descriptor not yet looked at, a nudge) or the proxy is
  /// stopping, sleeps until ring_doorbell() is called (by the transport's other threads with work
  /// for it, by the destructor, and on the host backend by device code after each post), `other_fd`
  /// (-1: none) is readable, or `poll` passed. On GPUs device code cannot ring, so `poll` bounds
  /// how late a descriptor is seen; where it can (host backend), the sleep lasts up to
  /// kDoorbellSleep.
  void sleep_until_rung(std::chrono::microseconds poll, int other_fd,
                        const std::function<bool()>& ready);
  /// Makes the doorbell an eventfd, for a transport whose thread also waits on a descriptor of
  /// its own in sleep_until_rung() (`other_fd`); otherwise it is the ring's `sleeping` word (a
  /// futex), the cheaper of the two. Before the proxy's threads start.
  void use_doorbell_fd();
  /// Wakes the thread in sleep_until_rung(); cheap when it is awake.
  void ring_doorbell() { detail::host_ring_doorbell(ring_); }
  /// How long a proxy thread polls after its last work before it sleeps (GNIO_PROXY_SPIN_US).
  std::chrono::microseconds spin() const { return spin_; }
  /// GNIO_PROXY_STATS: print where the time went when the proxy ends.
  bool stats() const { return stats_; }

  static constexpr std::uint32_t kMaxLandings = 64;
  /// The longest idle sleep where device code rings the doorbell (host backend): only what no
  /// ring announces (none is known) would wait this long.
  static constexpr std::chrono::microseconds kDoorbellSleep{50000};

  platform::Backend& backend_;
  int rank_;
  int size_;
  std::uint64_t token_;
  char* heap_base_;
  std::atomic<std::uint64_t> heap_bytes_;
  DeviceControl* control_;
  double timeout_s_;
  StreamRef stream_;
  ProxyHandle handle_{};  // handle_.words: device memory
  std::atomic<bool> stop_{false};

 private:
  std::function<void(int)> on_link_lost_;
  void* ring_memory_ = nullptr;  // host-mapped: ProxyRing, slots, results
  ProxyRing* ring_ = nullptr;
  // Landing regions: entries [0, landing_count_) are complete (written before the count is
  // released; only add_landing writes, under landing_mutex_).
  std::mutex landing_mutex_;
  Landing landings_[kMaxLandings];
  void* landing_memory_[kMaxLandings] = {};
  std::atomic<std::uint32_t> landing_count_{0};
  std::chrono::microseconds spin_{0};
  bool stats_ = false;
  // ProxyRing::doorbell (-1: the futex word), and whether device code rings it (it runs on CPU
  // threads).
  int doorbell_fd_ = -1;
  bool device_rings_ = false;
  std::atomic<bool> failed_{false};
  mutable std::mutex error_mutex_;
  std::string error_;
  int lost_peer_ = -1;
};

/// GNIO_PROXY_STAGING, checked: true for "always" (stage even where the proxy could address the
/// memory itself: how CI runs the GPUs' path on the host backend), false for "auto".
bool staging_forced();

/// The word operation a signal of `sig_op` (a SignalOp as it travels: Set or Add) is.
constexpr WordOp signal_word_op(std::uint32_t sig_op) {
  return word_op_of(sig_op == static_cast<std::uint32_t>(SignalOp::Set) ? SignalOp::Set
                                                                        : SignalOp::Add);
}

/// The proxy GNIO_NET (`net`: "auto", "tcp" or "ucx") asks for, connected to every rank on
/// another node. Collective over every rank. Throws Error(Unsupported) for "ucx" in a build
/// without UCX, or with GNIO_UCX_WORD_OPS=rma where the heap is staged (UCX cannot reach its
/// memory, or GNIO_PROXY_STAGING=always): its data then goes through host memory, and UCX atomics
/// cannot reach it.
std::unique_ptr<Proxy> make_proxy(const std::string& net, const ProxyArgs& args);

}  // namespace gnio::proxy
