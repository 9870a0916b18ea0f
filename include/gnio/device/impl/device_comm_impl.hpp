// Definitions of DeviceComm's members (declared and documented in gnio/device/device_comm.hpp).
// Written once for both backends: GPU-only paths sit behind GNIO_ON_DEVICE.
#pragma once

#include <cstddef>
#include <cstring>

#include "gnio/device/device_comm.hpp"
#include "gnio/device/impl/copy.hpp"

namespace gnio {

namespace detail {
/// Copies at most cap-1 characters of the tail of `s` (the most telling part of a path).
GNIO_HD_INLINE void copy_tail(char* out, unsigned cap, const char* s) {
  unsigned n = 0;
  while (s && s[n]) ++n;
  unsigned from = n + 1 > cap ? n + 1 - cap : 0;
  unsigned i = 0;
  for (; from + i < n && i + 1 < cap; ++i) out[i] = s[from + i];
  out[i] = '\0';
}
#if GNIO_ON_DEVICE
inline constexpr std::uint32_t kWaitCheckMask = 1023;  // read the timer/abort word every 1024 polls
#else
inline constexpr std::uint32_t kWaitCheckMask = 15;
#endif
/// A proxy descriptor with every field but the sequence word.
GNIO_HD_INLINE ProxyDesc proxy_desc(ProxyOp op, int peer, const void* src, std::uint64_t dst_offset,
                                    std::uint64_t bytes, std::uint64_t sig_offset,
                                    std::uint64_t value, SignalOp sig_op) {
  ProxyDesc d{};
  d.op = static_cast<std::uint32_t>(op);
  d.peer = peer;
  d.src = reinterpret_cast<std::uint64_t>(src);
  d.dst_offset = dst_offset;
  d.bytes = bytes;
  d.sig_offset = sig_offset;
  d.value = value;
  d.sig_op = static_cast<std::uint32_t>(sig_op);
  return d;
}
/// Copies `n` (at most kProxyInlineBytes) bytes of a post's data into its slot's inline buffer
/// (host memory on GPUs; 16-byte aligned): 8-byte units where the source allows, with four loads
/// in flight. Byte by byte, each byte cost a load and then a store over the bus that the next
/// load could not pass (~50 ns a byte: a 256-byte put_signal took 11-13 us longer one way than an
/// 8-byte one). Kept small: it sits in every kernel that may post (the general group copy added
/// ~1 000 instructions to each).
GNIO_HD_INLINE void copy_inline_data(char* to, const char* from, std::uint64_t n) {
#if !GNIO_ON_DEVICE
  std::memcpy(to, from, n);  // CPU threads: no bus, and no 8-byte loads of the caller's objects
#else
  if ((reinterpret_cast<std::uintptr_t>(from) | n) % 8 != 0) {
    // An unaligned source or size (rare): bytes.
    GNIO_NO_UNROLL
    for (std::uint64_t i = 0; i < n; ++i) to[i] = from[i];
    return;
  }
  auto* d = reinterpret_cast<std::uint64_t*>(to);
  const auto* s = reinterpret_cast<const std::uint64_t*>(from);
  constexpr std::uint64_t kInFlight = 4;
  const std::uint64_t units = n / 8;
  GNIO_NO_UNROLL
  for (std::uint64_t i = 0; i < units; i += kInFlight) {
    std::uint64_t t[kInFlight];
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kInFlight; ++k) t[k] = i + k < units ? s[i + k] : 0;
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kInFlight; ++k)
      if (i + k < units) d[i + k] = t[k];
  }
#endif
}
/// Writes every field of `d` but the sequence word into `slot`. On the GPU the slot is host
/// memory and each store a write over the bus: one 8-byte and three 16-byte stores instead of one
/// per field.
GNIO_HD_INLINE void write_slot_body(ProxyDesc* slot, const ProxyDesc& d) {
  static_assert(offsetof(ProxyDesc, op) == 8 && offsetof(ProxyDesc, src) == 16,
                "the sequence word, then op and peer, then three 16-byte pairs");
#if GNIO_ON_DEVICE
  const auto* from = reinterpret_cast<const std::uint64_t*>(&d);
  auto* to = reinterpret_cast<std::uint64_t*>(slot);
  to[1] = from[1];
  GNIO_UNROLL
  for (int k = 1; k < 4; ++k)
    reinterpret_cast<ulonglong2*>(slot)[k] = make_ulonglong2(from[2 * k], from[2 * k + 1]);
#else
  std::memcpy(reinterpret_cast<char*>(slot) + sizeof(d.seq),
              reinterpret_cast<const char*>(&d) + sizeof(d.seq), sizeof(d) - sizeof(d.seq));
#endif
}
}  // namespace detail

GNIO_NOINLINE GNIO_HD inline void DeviceComm::report(Status status, const char* op, int peer,
                                                     std::uint64_t heap_offset,
                                                     std::uint64_t expected, std::uint64_t seen,
                                                     Cmp cmp, std::uint64_t waited_ns,
                                                     CallSite site) const {
  if (!control_ || !stall_claim_) return;
  // The first failing thread of this rank wins the claim (in device memory) and fills the
  // host-mapped record with plain stores, publishing it with a release store of `state`.
  if (dev::atomic_exchange<dev::Scope::Device>(stall_claim_, 1u, dev::Order::AcqRel) == 0u) {
    StallRecord& r = control_->stall;
    r.status = status;
    r.rank = rank_;
    r.peer = peer;
    r.heap_offset = heap_offset;
    r.expected = expected;
    r.seen = seen;
    r.cmp = static_cast<std::uint32_t>(cmp);
    r.line = site.line;
    r.waited_ns = waited_ns;
    detail::copy_tail(r.op, sizeof(r.op), op);
    detail::copy_tail(r.file, sizeof(r.file), site.file);
    dev::atomic_store(&r.state, 2u, dev::Order::Release);
    // Every later wait of the communicator sees this and returns Status::Aborted (RemoteError
    // when the host marked a rank lost: that word is the host's, and stays as it set it).
    dev::atomic_store(&control_->error, 1u, dev::Order::Release);
  }
}

template <class Ready>
GNIO_HD inline Status DeviceComm::wait_until(Ready ready, const char* op, int peer,
                                             std::uint64_t heap_offset, Cmp cmp,
                                             std::uint64_t expected, CallSite site) const {
  // The deadline measures the absence of progress: it restarts whenever the watched value
  // changes (a credit or a counter that advances slowly but steadily never times out).
  std::uint64_t seen = 0;
  std::uint64_t start = 0, last = 0;
  for (std::uint32_t it = 0;; ++it) {
    if (ready(seen)) return Status::Ok;
    if ((it & detail::kWaitCheckMask) == detail::kWaitCheckMask) {
      if (aborted()) return abort_status();
      const std::uint64_t now = dev::now_ns();
      if (start == 0 || seen != last) {
        start = now;
        last = seen;
      } else if (timeout_ns_ && now - start > timeout_ns_) {
        report(Status::Timeout, op, peer, heap_offset, expected, seen, cmp, now - start, site);
        return Status::Timeout;
      }
    }
    dev::poll_pause(it);
  }
}

GNIO_HD_INLINE bool DeviceComm::p2p_target(int peer, std::uint64_t offset,
                                           std::uint64_t bytes) const {
  return static_cast<unsigned>(peer) < static_cast<unsigned>(size_) && offset <= heap_bytes_ &&
         bytes <= heap_bytes_ - offset && local_index(peer) >= 0;
}

GNIO_NOINLINE GNIO_HD inline bool DeviceComm::proxy_target(const char* op, int peer,
                                                           std::uint64_t offset,
                                                           std::uint64_t bytes,
                                                           CallSite site) const {
  if (proxy_.ring && static_cast<unsigned>(peer) < static_cast<unsigned>(size_) &&
      offset <= heap_bytes_ && bytes <= heap_bytes_ - offset && local_index(peer) < 0)
    return true;
  reject_target(op, peer, offset, bytes, site);
  return false;
}

GNIO_HD_INLINE bool DeviceComm::proxy_reaches(int peer, const void* addr, std::uint64_t bytes,
                                              bool inline_ok, CallSite site) const {
#if GNIO_ON_DEVICE
  // The proxy thread reaches global memory (through copies), not a thread's local memory or a
  // block's shared memory; put data of up to kProxyInlineBytes is copied by the device itself.
  if ((!inline_ok || bytes > kProxyInlineBytes) && !__isGlobal(addr)) [[unlikely]] {
    // (The op text is what the host prints; 31 characters fit the record.)
    report(Status::InvalidArgument, "proxy: not global memory", peer, ~0ull, bytes, 0, Cmp::Eq, 0,
           site);
    return false;
  }
#else
  (void)peer, (void)addr, (void)bytes, (void)inline_ok, (void)site;
#endif
  return true;
}

template <class Enough>
GNIO_HD_INLINE Status DeviceComm::proxy_wait(ProxyCounter which, Enough enough, const char* op,
                                             int peer, std::uint64_t heap_offset, Cmp cmp,
                                             std::uint64_t expected, CallSite site) const {
#if GNIO_ON_DEVICE
  ProxyDeviceWords* words = proxy_.words;
  std::uint64_t* copy = which == ProxyCounter::Head ? &words->head_seen : &words->done_seen;
  return wait_until(
      [&](std::uint64_t& seen) {
        seen = dev::atomic_load<dev::Scope::Device>(copy, dev::Order::Acquire);
        if (enough(seen)) return true;
        // Looked at before the exchange, so waiting threads do not all write the word each poll.
        if (dev::atomic_load<dev::Scope::Device>(&words->reading, dev::Order::Relaxed) == 0 &&
            dev::atomic_exchange<dev::Scope::Device>(&words->reading, 1u, dev::Order::Acquire) ==
                0) {
          // Both counters, so that threads waiting on the other one are served too (the reads
          // overlap on the bus).
          const std::uint64_t head = dev::atomic_load(&proxy_.ring->head, dev::Order::Acquire);
          const std::uint64_t done = dev::atomic_load(&proxy_.ring->done, dev::Order::Acquire);
          // Release: a thread that acquires a copy also sees what the proxy wrote before it
          // advanced the counter (causality runs on through this thread).
          (void)dev::atomic_fetch_max<dev::Scope::Device>(&words->head_seen, head,
                                                          dev::Order::Release);
          (void)dev::atomic_fetch_max<dev::Scope::Device>(&words->done_seen, done,
                                                          dev::Order::Release);
          dev::atomic_store<dev::Scope::Device>(&words->reading, 0u, dev::Order::Release);
          seen = which == ProxyCounter::Head ? head : done;
          return enough(seen);
        }
        // Another thread is reading a counter: what it read reaches the copy about one bus round
        // trip (~1 us) from now, so looking again sooner only loads the copy's cache line.
        __nanosleep(500);
        return false;
      },
      op, peer, heap_offset, cmp, expected, site);
#else
  const std::uint64_t* counter =
      which == ProxyCounter::Head ? &proxy_.ring->head : &proxy_.ring->done;
  return wait_until(
      [&](std::uint64_t& seen) {
        seen = dev::atomic_load(counter, dev::Order::Acquire);
        return enough(seen);
      },
      op, peer, heap_offset, cmp, expected, site);
#endif
}

GNIO_NOINLINE GNIO_HD inline bool DeviceComm::proxy_post(const ProxyDesc& desc, bool wait_consumed,
                                                         const char* op, CallSite site,
                                                         std::uint64_t* ticket_out) const {
  // Relaxed: the ticket only names a slot; the slot itself is published with a release below.
  // Device scope: only this GPU's threads count tickets (the proxy reads the slots, not this).
  const std::uint64_t ticket = dev::atomic_fetch_add<dev::Scope::Device>(
      &proxy_.words->tail, std::uint64_t{1}, dev::Order::Relaxed);
  const std::uint64_t capacity = proxy_.capacity;
  // A credit: the slot's previous occupant (ticket - capacity) must have been consumed.
  Status st = proxy_wait(
      ProxyCounter::Head, [&](std::uint64_t head) { return ticket - head < capacity; }, op,
      desc.peer, desc.dst_offset, Cmp::Gt, ticket - capacity, site);
  if (st != Status::Ok) return false;
  ProxyDesc* slot = proxy_.slots + (ticket & (capacity - 1));
  ProxyDesc body = desc;
  if ((desc.op == static_cast<std::uint32_t>(ProxyOp::Put) ||
       desc.op == static_cast<std::uint32_t>(ProxyOp::PutSignal)) &&
      desc.bytes <= kProxyInlineBytes && (desc.flags & kProxyHostSource) == 0) {
    // Small data rides in the slot's inline buffer (ordered by the release store of seq below).
    detail::copy_inline_data(proxy_.inline_data + (ticket & (capacity - 1)) * kProxyInlineBytes,
                             reinterpret_cast<const char*>(desc.src), desc.bytes);
    body.flags |= kProxyInline;
  }
  detail::write_slot_body(slot, body);
  dev::atomic_store(&slot->seq, ticket + 1, dev::Order::Release);
#if !GNIO_ON_DEVICE
  // On CPU threads the proxy sleeps while the ring is empty, and a post wakes it. The fence orders
  // the store above before the read of `sleeping` (the proxy announces its sleep before its last
  // look at the ring the same way), so either it sees the descriptor or this sees it asleep.
  dev::fence_system();
  if (dev::atomic_load(&proxy_.ring->sleeping, dev::Order::Relaxed) != 0)
    detail::host_ring_doorbell(proxy_.ring);
#endif
  if (ticket_out) *ticket_out = ticket;
  // Inline data was copied into the slot: the source may be reused now, without waiting for the
  // proxy to take the descriptor (a blocking put or put_signal of up to kProxyInlineBytes costs
  // what put_nbi costs).
  if (!wait_consumed || (body.flags & kProxyInline) != 0) return true;
  return proxy_wait(
             ProxyCounter::Head, [&](std::uint64_t head) { return head > ticket; }, op, desc.peer,
             desc.dst_offset, Cmp::Gt, ticket, site) == Status::Ok;
}

template <class Coop>
GNIO_NOINLINE GNIO_HD inline void DeviceComm::proxy_put(const ProxyDesc& desc, bool wait_consumed,
                                                        const char* op, CallSite site,
                                                        bool post) const {
  const Coop g{};
  // Every member's part of the source is written before the leader hands it to the proxy.
  g.sync();
  // A landing region's offsets come from gnio's own collectives (the target's proxy checks them
  // against the region); heap offsets are the caller's and are checked here.
  const bool heap = (desc.flags >> kProxyRegionShift) == 0;
  if (g.leader() && post &&
      proxy_reaches(desc.peer, reinterpret_cast<const void*>(desc.src), desc.bytes, true, site) &&
      (!heap || proxy_target(op, desc.peer, desc.dst_offset, desc.bytes, site)) &&
      (!heap || desc.op != static_cast<std::uint32_t>(ProxyOp::PutSignal) ||
       proxy_target(op, desc.peer, desc.sig_offset, sizeof(std::uint64_t), site)))
    (void)proxy_post(desc, wait_consumed, op, site);
  // A blocking put returns to every member only once the source may be reused.
  g.sync();
}

GNIO_NOINLINE GNIO_HD inline bool DeviceComm::proxy_wait_done(std::uint64_t ticket, const char* op,
                                                              int peer, std::uint64_t offset,
                                                              CallSite site) const {
  return proxy_wait(
             ProxyCounter::Done, [&](std::uint64_t done) { return done > ticket; }, op, peer,
             offset, Cmp::Gt, ticket, site) == Status::Ok;
}

template <class Coop>
GNIO_NOINLINE GNIO_HD inline void DeviceComm::proxy_get(void* dst, std::uint64_t src_offset,
                                                        std::uint64_t bytes, int peer, bool wait,
                                                        const char* op, CallSite site) const {
  const Coop g{};
  g.sync();  // a group operation: the group meets at entry and exit
  if (g.leader() && proxy_reaches(peer, dst, bytes, false, site) &&
      proxy_target(op, peer, src_offset, bytes, site)) {
    std::uint64_t ticket = 0;
    // The proxy thread writes `dst` (host backend: this process's memory).
    if (proxy_post(
            detail::proxy_desc(ProxyOp::Get, peer, dst, src_offset, bytes, 0, 0, SignalOp::Set),
            false, op, site, &ticket) &&
        wait)
      (void)proxy_wait_done(ticket, op, peer, src_offset, site);
  }
  // get() returns to every member once the data is there.
  g.sync();
}

GNIO_NOINLINE GNIO_HD inline std::uint64_t DeviceComm::proxy_atomic(
    AtomicOp aop, std::uint64_t offset, std::uint64_t width, std::uint64_t value,
    std::uint64_t expected, int peer, bool fetch, const char* op, CallSite site) const {
  if (!proxy_target(op, peer, offset, width, site)) return 0;
  ProxyDesc d = detail::proxy_desc(ProxyOp::Atomic, peer, nullptr, offset, width, expected, value,
                                   SignalOp::Set);
  d.sig_op = static_cast<std::uint32_t>(aop);
  d.flags = fetch ? kProxyFetch : 0u;
  std::uint64_t ticket = 0;
  if (!proxy_post(d, false, op, site, &ticket) || !fetch) return 0;
  // The old value comes back in this ticket's result slot (see ProxyResult).
  ProxyResult* r = proxy_.results + (ticket & (proxy_.capacity - 1));
  if (wait_until(
          [&](std::uint64_t& seen) {
            seen = dev::atomic_load(&r->seq, dev::Order::Acquire);
            return seen == ticket + 1;
          },
          op, peer, offset, Cmp::Eq, ticket + 1, site) != Status::Ok)
    return 0;
  const std::uint64_t old = dev::atomic_load(&r->value, dev::Order::Relaxed);
  dev::atomic_store(&r->seq, std::uint64_t{0}, dev::Order::Release);
  return old;
}

GNIO_NOINLINE GNIO_HD inline void DeviceComm::proxy_quiet() const {
  const std::uint64_t issued =
      dev::atomic_load<dev::Scope::Device>(&proxy_.words->tail, dev::Order::Acquire);
  (void)proxy_wait(
      ProxyCounter::Done, [&](std::uint64_t done) { return done >= issued; }, "quiet (proxy)", -1,
      ~0ull, Cmp::Ge, issued, CallSite{});
}

GNIO_NOINLINE GNIO_HD inline void DeviceComm::reject_target(const char* op, int peer,
                                                            std::uint64_t offset,
                                                            std::uint64_t bytes,
                                                            CallSite site) const {
  if (peer < 0 || peer >= size_)
    report(Status::InvalidArgument, op, peer, offset, 0, 0, Cmp::Eq, 0, site);
  else if (offset > heap_bytes_ || bytes > heap_bytes_ - offset)
    report(Status::InvalidArgument, op, peer, offset, bytes, heap_bytes_, Cmp::Le, 0, site);
  else
    report(Status::Unsupported, op, peer, offset, 0, 0, Cmp::Eq, 0, site);
}

// ---------------------------------------------------------------------------------------------
// one-sided data movement

// A group operation synchronizes the group at entry and at exit, as NVSHMEM's warp and block
// calls do (free for Thread): on entry so that every member's writes of the source (shared-memory
// staging, say) are there before any member copies it; on exit so that on return the whole
// transfer is done for every member - the source may be reused, and a signal that one member
// sends afterwards follows every member's stores (the barrier orders them before the signal's
// release, which is cumulative).
template <class Coop>
GNIO_HD_INLINE void DeviceComm::group_p2p_copy(void* dst, const void* src,
                                               std::size_t bytes) const {
  const Coop g{};
  g.sync();
  detail::group_copy(dst, src, bytes, g);
  g.sync();
}

template <class Coop>
GNIO_HD_INLINE void DeviceComm::put_bytes(std::uint64_t dst_offset, const void* src,
                                          std::size_t bytes, int peer, bool wait, const char* op,
                                          CallSite site) const {
  if (!p2p_target(peer, dst_offset, bytes)) [[unlikely]] {
    proxy_put<Coop>(
        detail::proxy_desc(ProxyOp::Put, peer, src, dst_offset, bytes, 0, 0, SignalOp::Set), wait,
        op, site);
    return;
  }
  group_p2p_copy<Coop>(peer_ptr(SymPtr<char>{heap_id_, 0, dst_offset}, peer), src, bytes);
}

template <class Coop>
GNIO_HD_INLINE void DeviceComm::get_bytes(void* dst, std::uint64_t src_offset, std::size_t bytes,
                                          int peer, bool wait, const char* op,
                                          CallSite site) const {
  if (!p2p_target(peer, src_offset, bytes)) [[unlikely]] {
    proxy_get<Coop>(dst, src_offset, bytes, peer, wait, op, site);
    return;
  }
  group_p2p_copy<Coop>(dst, peer_ptr(SymPtr<char>{heap_id_, 0, src_offset}, peer), bytes);
}

template <class Coop, class T>
GNIO_HD inline void DeviceComm::put(SymPtr<T> dst, const T* src, std::size_t count, int peer,
                                    CallSite site) const {
  put_bytes<Coop>(dst.offset, src, count * sizeof(T), peer, true, "put", site);
}

template <class Coop, class T>
GNIO_HD inline void DeviceComm::put_nbi(SymPtr<T> dst, const T* src, std::size_t count, int peer,
                                        CallSite site) const {
  put_bytes<Coop>(dst.offset, src, count * sizeof(T), peer, false, "put_nbi", site);
}

template <class Coop, class T>
GNIO_HD inline void DeviceComm::get(T* dst, SymPtr<T> src, std::size_t count, int peer,
                                    CallSite site) const {
  get_bytes<Coop>(dst, src.offset, count * sizeof(T), peer, true, "get", site);
}

template <class Coop, class T>
GNIO_HD inline void DeviceComm::get_nbi(T* dst, SymPtr<T> src, std::size_t count, int peer,
                                        CallSite site) const {
  get_bytes<Coop>(dst, src.offset, count * sizeof(T), peer, false, "get_nbi", site);
}

template <class Coop, class T>
GNIO_HD inline void DeviceComm::put_signal(SymPtr<T> dst, const T* src, std::size_t count,
                                           SymPtr<std::uint64_t> sig, std::uint64_t value,
                                           SignalOp op, int peer, CallSite site) const {
  const std::size_t bytes = count * sizeof(T);
  const Coop g{};
  if (!p2p_target(peer, dst.offset, bytes) || !p2p_target(peer, sig.offset, sizeof(std::uint64_t)))
      [[unlikely]] {
    // One descriptor: the target applies the data, then the signal, in that order.
    proxy_put<Coop>(
        detail::proxy_desc(ProxyOp::PutSignal, peer, src, dst.offset, bytes, sig.offset, value, op),
        true, "put_signal", site);
    return;
  }
  g.sync();  // every member's writes of the source come first (as in every group operation)
  detail::group_copy(peer_ptr(dst, peer), src, bytes, g);
  // Every member's stores happen before the leader's release (the group barrier orders them),
  // and a system-scope release is cumulative: a peer that acquires the signal sees all data.
  g.sync();
  if (g.leader()) {
    std::uint64_t* s = peer_ptr(sig, peer);
    if (op == SignalOp::Set)
      dev::atomic_store(s, value, dev::Order::Release);
    else
      dev::atomic_fetch_add(s, value, dev::Order::Release);
  }
}

// ---------------------------------------------------------------------------------------------
// signals and ordering

GNIO_HD inline void DeviceComm::signal(SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op,
                                       int peer, CallSite site) const {
  if (!p2p_target(peer, sig.offset, sizeof(std::uint64_t))) [[unlikely]] {
    if (proxy_target("signal", peer, sig.offset, sizeof(std::uint64_t), site))
      (void)proxy_post(
          detail::proxy_desc(ProxyOp::Signal, peer, nullptr, 0, 0, sig.offset, value, op), false,
          "signal", site);
    return;
  }
  std::uint64_t* s = peer_ptr(sig, peer);
  if (op == SignalOp::Set)
    dev::atomic_store(s, value, dev::Order::Release);
  else
    dev::atomic_fetch_add(s, value, dev::Order::Release);
}

GNIO_HD inline std::uint64_t DeviceComm::signal_read(SymPtr<std::uint64_t> sig) const {
  return dev::atomic_load(local(sig), dev::Order::Acquire);
}

template <class Coop>
GNIO_HD inline Status DeviceComm::group_status(Status own) const {
  if (!Coop{}.any(own != Status::Ok)) return Status::Ok;
  if (own != Status::Ok) return own;
  // This member's wait succeeded, another's failed: that one reported (which sets the error
  // word) or saw an abort or an error itself.
  return aborted() ? abort_status() : Status::Timeout;
}

template <class Coop>
GNIO_HD inline Status DeviceComm::wait_signal(SymPtr<std::uint64_t> sig, Cmp cmp,
                                              std::uint64_t value, CallSite site) const {
  std::uint64_t* s = local(sig);
  const Status st = wait_until(
      [&](std::uint64_t& seen) {
        seen = dev::atomic_load(s, dev::Order::Acquire);
        return compare(seen, cmp, value);
      },
      "wait_signal", -1, sig.offset, cmp, value, site);
  return group_status<Coop>(st);
}

GNIO_HD inline bool DeviceComm::test(SymPtr<std::uint64_t> sig, Cmp cmp,
                                     std::uint64_t value) const {
  return compare(dev::atomic_load(local(sig), dev::Order::Acquire), cmp, value);
}

// A proxy peer's fence also tells the proxy where it lies in the ring (the tickets reserved so
// far): the proxy lets a large put overtake an earlier one still in flight only where no fence
// lies between them, and keeps every other operation in ring order.
GNIO_HD inline void DeviceComm::fence(int peer) const {
  dev::fence_system();
  if (proxy_.ring && static_cast<unsigned>(peer) < static_cast<unsigned>(size_) &&
      local_index(peer) < 0) [[unlikely]] {
    const std::uint64_t reserved =
        dev::atomic_load<dev::Scope::Device>(&proxy_.words->tail, dev::Order::Relaxed);
    // Relaxed: this thread's later posts publish with a release, which orders this before them.
    (void)dev::atomic_fetch_max(&proxy_.ring->fenced, reserved, dev::Order::Relaxed);
  }
}

GNIO_HD inline void DeviceComm::quiet() const {
  dev::fence_system();
  if (proxy_.ring) [[unlikely]]
    proxy_quiet();
}

// ---------------------------------------------------------------------------------------------
// atomics: relaxed, as in OpenSHMEM — atomic on the word, no ordering of other accesses (use
// fence()/quiet() or a signal for that), so each costs one round trip and nothing more.

// Peers on other nodes: the proxy applies the atomic at the target (4- or 8-byte word) and
// sends the old value back; the non-fetching ones (set, add) do not wait, like put_nbi. `R` is
// the function's result type: void for those, which drop proxy_atomic's (unwaited) value.
#define GNIO_ATOMIC_PROXY(R, aop, value, expected, fetch, name)                                   \
  if (!p2p_target(peer, p.offset, sizeof(T))) [[unlikely]]                                        \
  return static_cast<R>(proxy_atomic(aop, p.offset, sizeof(T), static_cast<std::uint64_t>(value), \
                                     static_cast<std::uint64_t>(expected), peer, fetch, name,     \
                                     site))

template <class T>
GNIO_HD inline T DeviceComm::atomic_fetch(SymPtr<T> p, int peer, CallSite site) const {
  GNIO_ATOMIC_PROXY(T, AtomicOp::Fetch, 0, 0, true, "atomic_fetch");
  return dev::atomic_load(peer_ptr(p, peer), dev::Order::Relaxed);
}
template <class T>
GNIO_HD inline void DeviceComm::atomic_set(SymPtr<T> p, T value, int peer, CallSite site) const {
  GNIO_ATOMIC_PROXY(void, AtomicOp::Set, value, 0, false, "atomic_set");
  dev::atomic_store(peer_ptr(p, peer), value, dev::Order::Relaxed);
}
template <class T>
GNIO_HD inline void DeviceComm::atomic_add(SymPtr<T> p, T value, int peer, CallSite site) const {
  GNIO_ATOMIC_PROXY(void, AtomicOp::Add, value, 0, false, "atomic_add");
  dev::atomic_fetch_add(peer_ptr(p, peer), value, dev::Order::Relaxed);
}
template <class T>
GNIO_HD inline T DeviceComm::atomic_fetch_add(SymPtr<T> p, T value, int peer, CallSite site) const {
  GNIO_ATOMIC_PROXY(T, AtomicOp::FetchAdd, value, 0, true, "atomic_fetch_add");
  return dev::atomic_fetch_add(peer_ptr(p, peer), value, dev::Order::Relaxed);
}
template <class T>
GNIO_HD inline T DeviceComm::atomic_compare_swap(SymPtr<T> p, T expected, T desired, int peer,
                                                 CallSite site) const {
  GNIO_ATOMIC_PROXY(T, AtomicOp::CompareSwap, desired, expected, true, "atomic_compare_swap");
  return dev::atomic_compare_swap(peer_ptr(p, peer), expected, desired, dev::Order::Relaxed);
}
template <class T>
GNIO_HD inline T DeviceComm::atomic_swap(SymPtr<T> p, T value, int peer, CallSite site) const {
  GNIO_ATOMIC_PROXY(T, AtomicOp::Swap, value, 0, true, "atomic_swap");
  return dev::atomic_exchange(peer_ptr(p, peer), value, dev::Order::Relaxed);
}

#undef GNIO_ATOMIC_PROXY

// ---------------------------------------------------------------------------------------------
// team synchronisation

template <class Coop>
GNIO_HD inline Status DeviceComm::sync(const Team& team, CallSite site) const {
  const Coop g{};
  if (!team.contains_me()) {
    if (g.leader())
      report(Status::InvalidArgument, "sync (not a team member)", -1, 0, 0, 0, Cmp::Eq, 0, site);
    return Status::InvalidArgument;
  }
  std::uint64_t* epoch_word = local(team.sync_epoch);
  g.sync();
  if (g.leader()) *epoch_word += 1;
  g.sync();
  const std::uint64_t epoch = *epoch_word;
  Status st = Status::Ok;
  for (int i = static_cast<int>(g.rank()); i < team.size; i += static_cast<int>(g.size())) {
    const int peer = team.world_rank(i);
    const std::uint64_t flag_bytes = sizeof(std::uint64_t) * team.size;
    if (p2p_target(peer, team.sync_flags.offset, flag_bytes)) [[likely]] {
      dev::atomic_store(peer_ptr(team.sync_flags + team.index, peer), epoch, dev::Order::Release);
    } else if (!proxy_target("sync", peer, team.sync_flags.offset, flag_bytes, site) ||
               !proxy_post(
                   detail::proxy_desc(ProxyOp::Signal, peer, nullptr, 0, 0,
                                      (team.sync_flags + team.index).offset, epoch, SignalOp::Set),
                   false, "sync", site)) {
      st = aborted() ? abort_status() : Status::Unsupported;
      continue;
    }
  }
  for (int i = static_cast<int>(g.rank()); i < team.size && st == Status::Ok;
       i += static_cast<int>(g.size())) {
    std::uint64_t* flag = local(team.sync_flags + i);
    st = wait_until(
        [&](std::uint64_t& seen) {
          seen = dev::atomic_load(flag, dev::Order::Acquire);
          return seen >= epoch;
        },
        "sync", team.world_rank(i), (team.sync_flags + i).offset, Cmp::Ge, epoch, site);
  }
  return group_status<Coop>(st);
}

template <class Coop>
GNIO_HD inline Status DeviceComm::barrier(const Team& team, CallSite site) const {
  // Every member's operations are issued (the group barrier), so the leader's quiet completes
  // them all; sync() starts with a group barrier that holds the others until it has.
  const Coop g{};
  g.sync();
  if (g.leader()) quiet();
  return sync<Coop>(team, site);
}

}  // namespace gnio
