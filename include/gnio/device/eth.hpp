// Packet I/O from kernels: the receive and transmit queues of an Ethernet port (gnio::eth::Port,
// <gnio/eth.hpp>) as kernels see them. A kernel consumes the AF_XDP RX ring and refills the fill
// ring itself, and produces TX ring entries itself; the CPU only wakes the socket. Queue handles
// are passed to kernels by value, like DeviceComm.
//
//   RxQueue rx = port.rx();  TxQueue tx = port.tx();
//   gnio::launch(stream, {.grid = 1, .block = 1}, [=] GNIO_HD () {
//     gnio::eth::Packet p[32];
//     while (!rx.stopped()) {
//       unsigned n = gnio::eth::receive(rx, p, 32, 1000000);  // up to 1 ms
//       for (unsigned i = 0; i < n; ++i) { ... p[i].data, p[i].length ... }
//       gnio::eth::release(rx, n);
//     }
//   });
//
// Each queue has one consumer (RX) or one producer (TX) at a time: one thread, or one group
// through the <Coop> forms, whose leader touches the rings. Ring indices are 32-bit and wrap, as
// the Linux kernel's do. The same code runs on CPU threads with the host backend.
#pragma once

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/device/impl/copy.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/thread.hpp"

namespace gnio::eth {

/// One AF_XDP ring as the Linux kernel lays it out: producer and consumer indices and the entries.
struct Ring {
  std::uint32_t* producer = nullptr;
  std::uint32_t* consumer = nullptr;
  void* entries =
      nullptr;  ///< xdp_desc[] (RX, TX) or std::uint64_t[] UMEM addresses (fill, completion)
  std::uint32_t mask = 0;  ///< entries - 1 (a power of two)
};

/// An AF_XDP descriptor (struct xdp_desc).
struct Descriptor {
  std::uint64_t addr;
  std::uint32_t len;
  std::uint32_t options;
};

/// A received frame: where it is in the port's packet memory (readable and writable in place).
struct Packet {
  std::uint8_t* data = nullptr;
  std::uint32_t length = 0;
  /// When the receiving thread took it (dev::now_ns(); AF_XDP copy mode has no NIC timestamp).
  std::uint64_t timestamp_ns = 0;
};

/// The receive side of a port's queue.
struct RxQueue {
  Ring rx;    ///< filled by Linux: received frames
  Ring fill;  ///< filled by kernels: UMEM frames Linux may receive into
  std::uint8_t* umem = nullptr;
  std::uint32_t* stop = nullptr;  ///< set by Port::stop(): kernels should end
  /// The leader's count for its group (the <Coop> forms), in device memory: with the cuda
  /// backend the <Coop> forms are for kernels, the plain forms for kernels and CPU threads.
  std::uint32_t* handoff = nullptr;
  /// True once the host asked the port's kernels to end (Port::stop or close).
  GNIO_HD_INLINE bool stopped() const { return dev::atomic_load(stop, dev::Order::Acquire) != 0; }
};

/// The transmit side of a port's queue. TX frames are a fixed set of UMEM frames used in turn;
/// a frame is reused once Linux reported it sent (the completion ring, consumed by kernels).
struct TxQueue {
  Ring tx;          ///< filled by kernels: frames to send
  Ring completion;  ///< filled by Linux: frames sent
  std::uint8_t* umem = nullptr;
  std::uint64_t first_frame = 0;     ///< UMEM offset of TX frame 0
  std::uint32_t frame_size = 0;      ///< bytes per frame
  std::uint32_t frames = 0;          ///< TX frames (at most the TX ring's entries)
  std::uint32_t* stop = nullptr;     ///< as RxQueue::stop
  std::uint32_t* handoff = nullptr;  ///< as RxQueue::handoff (acquire<Coop>)
  GNIO_HD_INLINE bool stopped() const { return dev::atomic_load(stop, dev::Order::Acquire) != 0; }
};

namespace detail {

GNIO_HD_INLINE Descriptor* descriptors(const Ring& r) {
  return static_cast<Descriptor*>(r.entries);
}
GNIO_HD_INLINE std::uint64_t* addresses(const Ring& r) {
  return static_cast<std::uint64_t*>(r.entries);
}

/// `count()` run by the group's leader alone (it works the rings), its result for every thread
/// of the group: through `handoff`, between the group's barriers.
template <class Coop, class Count>
GNIO_HD_INLINE unsigned leader_count(std::uint32_t* handoff, Coop g, Count count) {
  g.sync();
  if (g.leader()) dev::atomic_store(handoff, count(), dev::Order::Relaxed);
  g.sync();
  return dev::atomic_load(handoff, dev::Order::Relaxed);
}

}  // namespace detail

/// Waits up to `timeout_ns` for received frames and describes up to `max` of them in `out`
/// (oldest first); returns how many (0: none arrived in time, or the port is stopping). The
/// frames stay the kernel's until release(). Call release() before the next receive().
GNIO_HD_INLINE unsigned receive(const RxQueue& q, Packet* out, unsigned max,
                                std::uint64_t timeout_ns) {
  const std::uint32_t cons = dev::atomic_load(q.rx.consumer, dev::Order::Relaxed);
  const std::uint64_t start = dev::now_ns();
  std::uint32_t avail = 0;
  for (std::uint32_t spin = 0;; ++spin) {
    // Acquire: the descriptors Linux wrote before publishing the producer index are visible.
    avail = dev::atomic_load(q.rx.producer, dev::Order::Acquire) - cons;
    if (avail != 0 || q.stopped() || dev::now_ns() - start >= timeout_ns) break;
    dev::poll_pause(spin);
  }
  const unsigned n = avail < max ? avail : max;
  const std::uint64_t now = dev::now_ns();
  for (unsigned i = 0; i < n; ++i) {
    const Descriptor d = detail::descriptors(q.rx)[(cons + i) & q.rx.mask];
    out[i].data = q.umem + d.addr;
    out[i].length = d.len;
    out[i].timestamp_ns = now;
  }
  return n;
}

/// Gives the `n` frames the last receive() returned back: they go to the fill ring for Linux to
/// receive into again, and the RX ring moves past them.
GNIO_HD_INLINE void release(const RxQueue& q, unsigned n) {
  if (n == 0) return;
  const std::uint32_t cons = dev::atomic_load(q.rx.consumer, dev::Order::Relaxed);
  const std::uint32_t prod = dev::atomic_load(q.fill.producer, dev::Order::Relaxed);
  // The fill ring has room for every frame the RX ring holds (the port sizes them so).
  for (unsigned i = 0; i < n; ++i) {
    const std::uint64_t addr = detail::descriptors(q.rx)[(cons + i) & q.rx.mask].addr;
    // The frame's start, whatever headroom offset Linux put the data at.
    detail::addresses(q.fill)[(prod + i) & q.fill.mask] = addr;
  }
  // Release: the entries are written before Linux sees the new indices; the kernel's reads of
  // the frames happened before Linux may overwrite them.
  dev::atomic_store(q.fill.producer, prod + n, dev::Order::Release);
  dev::atomic_store(q.rx.consumer, cons + n, dev::Order::Release);
}

/// A TX frame a kernel writes before send().
struct TxFrame {
  std::uint8_t* data = nullptr;
  std::uint64_t addr = 0;  ///< UMEM offset (what send() passes on)
};

/// Waits up to `timeout_ns` for free TX frames (ones Linux has finished sending) and hands out up
/// to `max` of them in `frames`, in the order send() must queue them; returns how many (0 on
/// timeout or when the port is stopping). Frames handed out but not sent are handed out again by
/// the next acquire(). One call reads the rings a few times, whatever `max` is: from a GPU, each
/// read crosses PCIe (about a microsecond), so take frames in batches where rates matter.
GNIO_HD_INLINE unsigned acquire(const TxQueue& q, TxFrame* frames, unsigned max,
                                std::uint64_t timeout_ns) {
  const std::uint32_t prod = dev::atomic_load(q.tx.producer, dev::Order::Relaxed);
  std::uint32_t done = dev::atomic_load(q.completion.consumer, dev::Order::Relaxed);
  const std::uint64_t start = dev::now_ns();
  for (std::uint32_t spin = 0; max != 0 && prod - done >= q.frames; ++spin) {
    // Completions come in order (copy mode sends the TX ring in order): the count is enough.
    const std::uint32_t completed = dev::atomic_load(q.completion.producer, dev::Order::Acquire);
    if (completed != done) {
      done = completed;
      dev::atomic_store(q.completion.consumer, done, dev::Order::Release);
      continue;
    }
    if (q.stopped() || dev::now_ns() - start >= timeout_ns) return 0;
    dev::poll_pause(spin);
  }
  // Take the completions that came meanwhile too: a batch is worth one more read.
  if (max > 1 && q.frames - (prod - done) < max) {
    const std::uint32_t completed = dev::atomic_load(q.completion.producer, dev::Order::Acquire);
    if (completed != done) {
      done = completed;
      dev::atomic_store(q.completion.consumer, done, dev::Order::Release);
    }
  }
  const std::uint32_t free = q.frames - (prod - done);
  const unsigned n = free < max ? free : max;
  for (unsigned i = 0; i < n; ++i) {
    // q.frames is a power of two: a mask, not a division.
    frames[i].addr =
        q.first_frame + static_cast<std::uint64_t>((prod + i) & (q.frames - 1)) * q.frame_size;
    frames[i].data = q.umem + frames[i].addr;
  }
  return n;
}

/// Waits up to `timeout_ns` for one free TX frame; false on timeout or when the port is stopping.
GNIO_HD_INLINE bool acquire(const TxQueue& q, TxFrame* frame, std::uint64_t timeout_ns) {
  return acquire(q, frame, 1, timeout_ns) == 1;
}

/// Queues the first `n` frames of the last acquire() (`lengths[i]` bytes written at
/// frames[i].data) for sending, with one update of the ring's index; the port's CPU thread wakes
/// the socket.
GNIO_HD_INLINE void send(const TxQueue& q, const TxFrame* frames, const std::uint32_t* lengths,
                         unsigned n) {
  if (n == 0) return;
  const std::uint32_t prod = dev::atomic_load(q.tx.producer, dev::Order::Relaxed);
  for (unsigned i = 0; i < n; ++i)
    detail::descriptors(q.tx)[(prod + i) & q.tx.mask] = Descriptor{frames[i].addr, lengths[i], 0};
  // Release: the frames' bytes and the descriptors are written before Linux sees the index.
  dev::atomic_store(q.tx.producer, prod + n, dev::Order::Release);
}

/// Queues `frame` (from acquire(), `length` bytes written at frame.data) for sending.
GNIO_HD_INLINE void send(const TxQueue& q, const TxFrame& frame, std::uint32_t length) {
  send(q, &frame, &length, 1);
}

/// send() once the kernel's clock (dev::now_ns()) reaches `when_ns`: the calling thread waits
/// until then (software timing: AF_XDP in copy mode has no launch time). The frame leaves when
/// the port's CPU thread next wakes the socket, microseconds later.
GNIO_HD_INLINE void send_at(const TxQueue& q, const TxFrame& frame, std::uint32_t length,
                            std::uint64_t when_ns) {
  for (std::uint32_t spin = 0; dev::now_ns() < when_ns && !q.stopped(); ++spin)
    if (when_ns - dev::now_ns() > 200000) dev::poll_pause(spin);  // sleep only when far off
  send(q, frame, length);
}

/// receive() for a group: the leader reads the ring, every thread of the group gets the count;
/// `out` must be memory the whole group reads (shared or global).
template <class Coop>
GNIO_HD_INLINE unsigned receive(const RxQueue& q, Packet* out, unsigned max,
                                std::uint64_t timeout_ns, Coop g = {}) {
  return detail::leader_count(q.handoff, g, [&] { return receive(q, out, max, timeout_ns); });
}

/// release() for a group: after every thread of it is done with the frames.
template <class Coop>
GNIO_HD_INLINE void release(const RxQueue& q, unsigned n, Coop g) {
  g.sync();
  if (g.leader()) release(q, n);
  g.sync();
}

/// acquire() for a group: the leader takes up to `max` frames into `frames` (memory the whole
/// group reads: shared or global), every thread of the group gets the count.
template <class Coop>
GNIO_HD_INLINE unsigned acquire(const TxQueue& q, TxFrame* frames, unsigned max,
                                std::uint64_t timeout_ns, Coop g) {
  return detail::leader_count(q.handoff, g, [&] { return acquire(q, frames, max, timeout_ns); });
}

/// send() for a group: after every thread of it has written its share of the frames.
template <class Coop>
GNIO_HD_INLINE void send(const TxQueue& q, const TxFrame* frames, const std::uint32_t* lengths,
                         unsigned n, Coop g) {
  g.sync();
  if (g.leader()) send(q, frames, lengths, n);
}

/// The group's threads together copy `bytes` from `src` into packet memory (or out of it), in
/// 16-byte pieces where both addresses allow: from a GPU, packet memory is host memory across
/// PCIe, where one thread writing bytes one by one moves a few MB/s. No synchronisation: the
/// Coop forms of send() and release() sync the group first.
template <class Coop>
GNIO_HD_INLINE void copy(void* dst, const void* src, std::size_t bytes, Coop g) {
  gnio::detail::group_copy(dst, src, bytes, g);
}

}  // namespace gnio::eth
