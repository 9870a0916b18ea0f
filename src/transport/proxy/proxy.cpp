#include "transport/proxy/proxy.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "base/futex.hpp"
#include "base/thread_name.hpp"
#include "gnio/config.hpp"
#include "gnio/device/atomic.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/word_ops.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy_frame.hpp"

namespace gnio {

void detail::host_ring_doorbell(ProxyRing* ring) {
  if (dev::atomic_exchange(&ring->sleeping, 0u, dev::Order::SeqCst) == 0) return;
  if (ring->doorbell < 0) {
    futex_wake(&ring->sleeping, 1);
  } else {
    const std::uint64_t one = 1;
    (void)!::write(ring->doorbell, &one, sizeof(one));
  }
}

namespace proxy {

Proxy::Proxy(const ProxyArgs& args)
    : backend_(args.backend),
      rank_(args.bootstrap.rank()),
      size_(args.bootstrap.size()),
      token_(args.bootstrap.token()),
      heap_base_(args.heap_base),
      heap_bytes_(args.heap_bytes),
      control_(args.control),
      timeout_s_(args.timeout_s),
      stream_(args.stream),
      on_link_lost_(args.on_link_lost) {
  const long long slots = config_int("GNIO_PROXY_SLOTS");
  GNIO_REQUIRE(slots >= 2 && slots <= 65536 && (slots & (slots - 1)) == 0,
               "GNIO_PROXY_SLOTS=%lld is not a power of two in [2, 65536]", slots);
  const long long spin_us = config_int("GNIO_PROXY_SPIN_US");
  GNIO_REQUIRE(spin_us >= -1, "GNIO_PROXY_SPIN_US=%lld is not -1 (auto) or a duration", spin_us);
  stats_ = config_bool("GNIO_PROXY_STATS");
  spin_ = std::chrono::microseconds(spin_us >= 0                                     ? spin_us
                                    : backend_.kind() == platform::BackendKind::Host ? 0
                                                                                     : 10000);
  // Host-mapped memory: on GPUs the device writes descriptors the proxy thread reads.
  const auto n = static_cast<std::size_t>(slots);
  const std::size_t bytes =
      64 + sizeof(ProxyRing) + (sizeof(ProxyDesc) + sizeof(ProxyResult) + kProxyInlineBytes) * n;
  ring_memory_ = backend_.alloc_host_mapped(bytes);
  std::memset(ring_memory_, 0, bytes);
  const auto aligned = (reinterpret_cast<std::uintptr_t>(ring_memory_) + 63) & ~std::uintptr_t{63};
  ring_ = reinterpret_cast<ProxyRing*>(aligned);
  handle_.ring = ring_;
  handle_.capacity = n;
  handle_.slots = reinterpret_cast<ProxyDesc*>(aligned + sizeof(ProxyRing));
  handle_.results = reinterpret_cast<ProxyResult*>(handle_.slots + n);
  handle_.inline_data = reinterpret_cast<char*>(handle_.results + n);
  // The ticket counter and the counter copies: device memory, zeroed in stream order before any
  // kernel can post.
  handle_.words = static_cast<ProxyDeviceWords*>(backend_.alloc_device(sizeof(ProxyDeviceWords)));
  backend_.fill(handle_.words, 0, sizeof(ProxyDeviceWords), stream_);
  backend_.stream_synchronize(stream_);
  ring_->doorbell = -1;
  device_rings_ = backend_.kind() == platform::BackendKind::Host;
}

Proxy::~Proxy() {
  for (void* m : landing_memory_) backend_.free_host_mapped(m);
  backend_.free_device(handle_.words);
  backend_.free_host_mapped(ring_memory_);
  if (doorbell_fd_ >= 0) ::close(doorbell_fd_);
}

void Proxy::use_doorbell_fd() {
  doorbell_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doorbell_fd_ < 0) fail_errno("rank %d: proxy: an eventfd for its doorbell", rank_);
  ring_->doorbell = doorbell_fd_;
}

void Proxy::sleep_until_rung(std::chrono::microseconds poll, int other_fd,
                             const std::function<bool()>& ready) {
  // Announced before the last look, as a poster publishes before it looks for a sleeper: one of
  // the two sees the other (see DeviceComm::proxy_post).
  dev::atomic_store(&ring_->sleeping, 1u, dev::Order::SeqCst);
  dev::fence_system();
  if (!ready() && !stop_.load(std::memory_order_acquire)) {
    const auto us = static_cast<long>((device_rings_ ? kDoorbellSleep : poll).count());
    const timespec ts{us / 1000000, (us % 1000000) * 1000};
    if (doorbell_fd_ < 0) {
      // Returns at once if the doorbell rang since the announcement (the word is 0 again).
      futex_sleep(&ring_->sleeping, 1u, &ts);
    } else {
      pollfd fds[2] = {{doorbell_fd_, POLLIN, 0}, {other_fd, POLLIN, 0}};
      (void)::ppoll(fds, other_fd >= 0 ? 2 : 1, &ts, nullptr);
      if (fds[0].revents & POLLIN) {
        std::uint64_t rung = 0;
        (void)!::read(doorbell_fd_, &rung, sizeof(rung));
      }
    }
  }
  dev::atomic_store(&ring_->sleeping, 0u, dev::Order::Relaxed);
}

Proxy::Landing Proxy::add_landing(std::uint64_t inbox_bytes, std::uint64_t outbox_bytes) {
  std::lock_guard<std::mutex> lock(landing_mutex_);
  const std::uint32_t n = landing_count_.load(std::memory_order_relaxed);
  if (n == kMaxLandings)
    fail(ErrorClass::Unsupported,
         "rank %d: proxy: more than %u landing regions (each collective channel of a "
         "communicator that spans nodes takes one); use fewer streams for collectives",
         rank_, kMaxLandings);
  // Inbox then outbox, each 64-byte aligned (flags on their own lines, 16-byte device copies).
  const std::uint64_t in = (inbox_bytes + 63) & ~std::uint64_t{63};
  const std::uint64_t out = (outbox_bytes + 63) & ~std::uint64_t{63};
  char* memory = static_cast<char*>(backend_.alloc_host_mapped(in + out + 64));
  landing_memory_[n] = memory;
  char* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(memory) + 63) &
                                       ~std::uintptr_t{63});
  landings_[n] = Landing{n + 1, base, inbox_bytes, base + in, outbox_bytes};
  // Before the region is published: the backend makes it reachable (and learns how to reach the
  // peers' copies) first, so no thread acts on a region it cannot address yet.
  landing_added(landings_[n]);
  landing_count_.store(n + 1, std::memory_order_release);
  return landings_[n];
}

const Proxy::Landing* Proxy::landing(std::uint32_t id) const {
  return id >= 1 && id <= landing_count_.load(std::memory_order_acquire) ? &landings_[id - 1]
                                                                         : nullptr;
}

bool Proxy::in_outbox(std::uint64_t src, std::uint64_t bytes) const {
  const std::uint32_t n = landing_count_.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto base = reinterpret_cast<std::uint64_t>(landings_[i].outbox);
    if (src >= base && inside_heap(src - base, bytes, landings_[i].outbox_bytes)) return true;
  }
  return false;
}

void Proxy::run_guarded(const char* thread, const std::function<void()>& loop) {
  // "gnio-" and the role, within the 15 characters Linux keeps ("lane receiver" ->
  // "gnio-lane-recv").
  char name[16] = "gnio-";
  for (std::size_t i = 5, j = 0; i < 15 && thread[j]; ++i, ++j)
    name[i] = thread[j] == ' ' ? '-' : thread[j];
  name_this_thread(name);
  try {
    loop();
  } catch (const std::exception& e) {
    fail_transport(format("rank %d: proxy %s thread: %s", rank_, thread, e.what()));
  }
}

void Proxy::publish_head(std::uint64_t head) {
  dev::atomic_store(&ring_->head, head, dev::Order::Release);
}

void Proxy::publish_done(std::uint64_t done) {
  dev::atomic_store(&ring_->done, done, dev::Order::Release);
}

bool Proxy::drain() {
  const Deadline deadline = Deadline::after(timeout_s_);
  // Called once device work is over: the tickets reserved so far are all there will be.
  std::uint64_t posted = 0;
  backend_.copy(&posted, &handle_.words->tail, sizeof(posted), stream_);
  backend_.stream_synchronize(stream_);
  for (;;) {
    if (failed() || control_stopped(*control_, dev::Order::Acquire)) return true;
    if (dev::atomic_load(&ring_->done, dev::Order::Acquire) >= posted) return true;
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void Proxy::check() const {
  if (!failed()) return;
  std::string what;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    what = error_;
  }
  fail(ErrorClass::RemoteError, "%s. The communicator is aborted: destroy it", what.c_str());
}

void Proxy::fail_transport(const std::string& what, int lost_peer) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (failed_.load(std::memory_order_relaxed)) {
      GNIO_INFO(Proxy, "rank %d: also: %s", rank_, what.c_str());
      return;
    }
    error_ = what;
    lost_peer_ = lost_peer;
    // Before the abort word: a host check that follows a device wait ended by it reports this
    // failure, not an anonymous abort.
    failed_.store(true, std::memory_order_release);
    // Device waits (credits, quiet, signals that will never come) end now, naming the peer
    // whose link was lost. A lost-rank abort that came first keeps its code and rank.
    if (lost_peer >= 0 && on_link_lost_) on_link_lost_(lost_peer);
    dev::atomic_store(&control_->error, 1u, dev::Order::Release);
  }
  GNIO_WARN(Proxy, "%s", what.c_str());
}

std::string Proxy::failure() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

int Proxy::failed_peer() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return lost_peer_;
}

bool Proxy::deliver_result(std::uint64_t ticket, std::uint64_t value) {
  ProxyResult* r = handle_.results + (ticket & (handle_.capacity - 1));
  const Deadline deadline = Deadline::after(timeout_s_);
  while (dev::atomic_load(&r->seq, dev::Order::Acquire) != 0) {
    if (failed() || stop_.load(std::memory_order_acquire)) return false;
    if (deadline.expired()) {
      fail_transport(
          format("rank %d: proxy: the result slot of atomic %llu was not freed within "
                 "%.0f s (the device thread of an earlier atomic did not collect its "
                 "result)",
                 rank_, static_cast<unsigned long long>(ticket), timeout_s_));
      return false;
    }
    std::this_thread::yield();
  }
  dev::atomic_store(&r->value, value, dev::Order::Relaxed);
  dev::atomic_store(&r->seq, ticket + 1, dev::Order::Release);
  return true;
}

bool staging_forced() {
  const std::string staging = config_text("GNIO_PROXY_STAGING");
  GNIO_REQUIRE(staging == "auto" || staging == "always",
               "GNIO_PROXY_STAGING='%s' is not one of auto, always", staging.c_str());
  return staging == "always";
}

}  // namespace proxy
}  // namespace gnio
