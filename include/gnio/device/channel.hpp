// Two-sided messages between kernels: a channel per (peer, tag) of a gnio::Channels set
// (<gnio/channel.hpp>). The sender picks the size of each message; the receiver takes the next
// one in order, whole. Messages travel as put_signal() into a ring of `depth` slots in the
// receiver's symmetric heap and are acknowledged by a credit signal back, so the same code runs
// over peer memory and through the proxy to other nodes, on GPUs and on CPU threads. Small slots
// to peers on the same node travel as low-latency packets instead (travels_as_packets()).
//
//   gnio::launch(stream, {.grid = 1, .block = 128}, [=] GNIO_HD () {
//     gnio::Channel to = set.channel(peer, 0);
//     gnio::send<gnio::Block>(to, request, bytes);
//     gnio::Received r = gnio::recv<gnio::Block>(set.channel(peer, 1), reply, sizeof(reply));
//     if (r.status != gnio::Status::Ok) return;     // Comm::check() has the report
//   });
//
// Rules:
//  * One sender and one receiver per channel at a time (a thread, or one group through the Coop
//    forms, which every member calls with the same arguments). Use tags to run several at once.
//  * Messages of one channel arrive in the order sent; a message larger than the set's
//    max_message travels as several slots and still arrives whole and in order.
//  * Every wait is bounded (GNIO_TIMEOUT) and reported like the other device waits; a peer that
//    dies ends them with RemoteError, and no message is handed over unless it arrived whole.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/coop.hpp"
#include "gnio/device/device_comm.hpp"
#include "gnio/device/impl/copy.hpp"

namespace gnio {

/// The kernels' view of a Channels set (Channels::device_handle()); trivially copyable, pass by
/// value.
struct DeviceChannels {
  DeviceComm comm;
  /// Receive rings: [from rank][tag][slot] of `slot_bytes` each (in the receiver's heap).
  SymPtr<char> rings;
  /// Slot flags: [from rank][tag][slot]; slot_seq(n) << 32 | more << 31 | bytes of slot n.
  SymPtr<std::uint64_t> flags;
  /// Credits: [to rank][tag]; how many slots that receiver has consumed (in the sender's heap).
  SymPtr<std::uint64_t> credits;
  /// This rank's own counters: slots sent [to rank][tag] and consumed [from rank][tag].
  SymPtr<std::uint64_t> sent, consumed;
  /// Low-latency packets: [from rank][tag][slot] of `ll_cells` 8-byte cells (in the receiver's
  /// heap). See detail::travels_as_packets().
  SymPtr<std::uint64_t> ll;
  int tags = 0;
  std::uint32_t depth = 0;       ///< slots per channel: a power of two (ring indices are masks)
  std::uint64_t slot_bytes = 0;  ///< max_message rounded up to 256
  std::uint64_t max_message = 0;
  std::uint64_t ll_max = 0;    ///< largest piece sent as packets (0: none)
  std::uint64_t ll_cells = 0;  ///< cells per packet slot: ll_max / 4, rounded up

  /// The channel to and from `peer` with `tag` (0 <= tag < tags).
  GNIO_HD_INLINE struct Channel channel(int peer, int tag) const;
};

/// One (peer, tag) of a DeviceChannels: where send() goes and recv() comes from. Holds a pointer
/// to the set it came from: use it while that set (a kernel parameter, say) lives.
struct Channel {
  const DeviceChannels* set = nullptr;
  int peer = -1;
  int tag = 0;
};

GNIO_HD_INLINE Channel DeviceChannels::channel(int peer, int tag) const {
  return Channel{this, peer, tag};
}

/// How a recv() or try_recv() ended.
struct Received {
  Status status = Status::Ok;
  bool arrived =
      false;  ///< a whole message was taken (true exactly when status is Ok and one was there)
  std::size_t bytes = 0;  ///< its size
};

namespace detail {

inline constexpr std::uint64_t kSlotMore = 1ull << 31;
inline constexpr std::uint64_t kSlotBytesMask = kSlotMore - 1;

/// Index of (rank, tag) in the per-pair arrays.
GNIO_HD_INLINE std::uint64_t pair_index(const Channel& c, int rank) {
  return static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(c.set->tags) +
         static_cast<std::uint64_t>(c.tag);
}

/// False (and a report: InvalidArgument) for a channel that names no peer or tag of its set.
GNIO_HD inline bool channel_valid(const Channel& c, const char* op, CallSite site) {
  if (c.set != nullptr && c.peer >= 0 && c.peer < c.set->comm.size() && c.tag >= 0 &&
      c.tag < c.set->tags)
    return true;
  if (c.set != nullptr)
    DeviceCommPort::report(c.set->comm, Status::InvalidArgument, op, c.peer, 0,
                           static_cast<std::uint64_t>(c.set->tags),
                           static_cast<std::uint64_t>(c.tag), Cmp::Lt, 0, site);
  return false;
}

/// Slots consumed between two credits: half the ring (at least 1), a power of two. A sender
/// that sent n slots needs credit >= n + 1 - depth for the next; a receiver that consumed all n
/// has credited at least n - interval + 1 >= n + 1 - depth, so the sender never waits on
/// consumed slots.
GNIO_HD_INLINE std::uint64_t credit_interval(const DeviceChannels& s) {
  return s.depth > 1 ? s.depth / 2 : 1;
}

/// Index of slot `n` of a channel's ring (depth is a power of two: no division on the path).
GNIO_HD_INLINE std::uint64_t ring_slot(const DeviceChannels& s, std::uint64_t n) {
  return n & (s.depth - 1);
}

/// True when a slot of `piece` bytes, the last of its message (`more` false), travels to or from
/// `peer` as low-latency packets: cells of 4 data bytes and the slot's sequence number, each
/// stored with one 8-byte store and no fence (a cell says itself whether it has arrived), and
/// the slot's flag stored without a fence too; instead of a put_signal (data, a system-wide
/// release, the flag). Only over peer memory: the proxy moves bytes, not cells. Sender and
/// receiver decide the same way from the same values, so the flag needs no mark of its own.
GNIO_HD_INLINE bool travels_as_packets(const DeviceChannels& s, int peer, std::uint64_t piece,
                                       bool more) {
  return !more && piece > 0 && piece <= s.ll_max && s.comm.is_p2p(peer);
}

/// Copies `n` <= 4 bytes: one 4-byte access when both ends allow it (the common case: packets
/// hold 4 data bytes each), bytes otherwise.
GNIO_HD_INLINE void copy_bytes(void* dst, const void* src, std::uint64_t n) {
  if (n == 4 &&
      ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 3) == 0) {
    *static_cast<std::uint32_t*>(dst) = *static_cast<const std::uint32_t*>(src);
    return;
  }
  for (std::uint64_t i = 0; i < n; ++i)
    static_cast<char*>(dst)[i] = static_cast<const char*>(src)[i];
}

/// The sequence number of a channel's slot `n` (its flag's upper half, its packets' cells): the
/// low 31 bits of n + 1 with the top bit set. Receivers compare it for equality, so it may wrap
/// (a slot holds either its previous use's number, n + 1 - depth, or this one's: they differ
/// while depth < 2^31); the top bit keeps it apart from memory never written (zero).
GNIO_HD_INLINE std::uint32_t slot_seq(std::uint64_t n) {
  return 0x80000000u | (static_cast<std::uint32_t>(n + 1) & 0x7fffffffu);
}
/// The sequence number a flag carries.
GNIO_HD_INLINE std::uint32_t flag_seq(std::uint64_t flag) {
  return static_cast<std::uint32_t>(flag >> 32);
}

/// Cells a member moves at once: their loads are issued together (a packet store is a strong
/// store that later loads may not pass, a packet load a strong load whose value decides the next
/// step), so a slot of up to kPacketBatch x group size cells costs one round trip on each side
/// instead of one per cell.
inline constexpr std::uint64_t kPacketBatch = 4;

/// This member's share of a slot's packets: cells g.rank(), g.rank() + g.size(), ... of the
/// `bytes` at `src`, stored into `cells` (the receiver's, through peer memory).
template <class Coop>
GNIO_HD_INLINE void store_packets(std::uint64_t* cells, const char* src, std::uint64_t bytes,
                                  std::uint32_t seq, const Coop& g) {
  const std::uint64_t count = (bytes + 3) / 4;
  const std::uint64_t step = g.size();
  for (std::uint64_t first = g.rank(); first < count; first += kPacketBatch * step) {
    std::uint32_t word[kPacketBatch];
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kPacketBatch; ++k) {
      const std::uint64_t i = first + k * step, at = 4 * i;
      word[k] = 0;
      if (i < count) copy_bytes(&word[k], src + at, bytes - at < 4 ? bytes - at : 4);
    }
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kPacketBatch; ++k) {
      const std::uint64_t i = first + k * step;
      if (i < count)
        dev::atomic_store(cells + i, (static_cast<std::uint64_t>(seq) << 32) | word[k],
                          dev::Order::Relaxed);
    }
  }
}

/// This member's wait (bounded, with `order`) until the word at `w` (heap offset `offset`) carries
/// sequence number `seq` in its upper half (a flag, or a packet's cell); `*word` gets the word.
GNIO_HD inline Status wait_seq(const DeviceComm& dc, const std::uint64_t* w, std::uint64_t offset,
                               std::uint32_t seq, dev::Order order, const char* op, int peer,
                               CallSite site, std::uint64_t* word) {
  std::uint64_t last = dev::atomic_load(w, order);
  Status st = Status::Ok;
  if (flag_seq(last) != seq)
    st = DeviceCommPort::wait_until(
        dc,
        [&](std::uint64_t& now) {
          last = dev::atomic_load(w, order);
          now = flag_seq(last);
          return flag_seq(last) == seq;
        },
        op, peer, offset, Cmp::Eq, seq, site);
  *word = last;
  return st;
}

/// This member's share of a slot's packets, received: waits (bounded) for each of its cells to
/// carry `seq`, then copies its data bytes to `dst`. No group barrier.
template <class Coop>
GNIO_HD Status take_packets(const DeviceComm& dc, const std::uint64_t* cells,
                            std::uint64_t cells_offset, char* dst, std::uint64_t bytes,
                            std::uint32_t seq, const char* op, int peer, CallSite site,
                            const Coop& g) {
  const std::uint64_t count = (bytes + 3) / 4;
  const std::uint64_t step = g.size();
  for (std::uint64_t first = g.rank(); first < count; first += kPacketBatch * step) {
    std::uint64_t cell[kPacketBatch];
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kPacketBatch; ++k) {
      const std::uint64_t i = first + k * step;
      cell[k] = i < count ? dev::atomic_load(cells + i, dev::Order::Relaxed) : 0;
    }
    GNIO_UNROLL
    for (std::uint64_t k = 0; k < kPacketBatch; ++k) {
      const std::uint64_t i = first + k * step;
      if (i >= count) break;
      if (flag_seq(cell[k]) != seq) {  // not there yet: wait for this one (bounded)
        const Status st = wait_seq(dc, cells + i, cells_offset + 8 * i, seq, dev::Order::Relaxed,
                                   op, peer, site, &cell[k]);
        if (st != Status::Ok) return st;
      }
      const std::uint32_t word = static_cast<std::uint32_t>(cell[k]);
      const std::uint64_t at = 4 * i;
      copy_bytes(dst + at, &word, bytes - at < 4 ? bytes - at : 4);
    }
  }
  return Status::Ok;
}

/// This member's wait (bounded) until this rank's `word` >= `value`; no group barrier. A stall
/// report names `op` and the peer the channel waits on. `*seen` gets the value the last load
/// returned, so that a caller needs no second load of a flag it has just waited for (an L2 round
/// trip on a message's path).
GNIO_HD inline Status wait_word_member(const DeviceComm& dc, SymPtr<std::uint64_t> word,
                                       std::uint64_t value, const char* op, int peer, CallSite site,
                                       std::uint64_t* seen) {
  const std::uint64_t* w = dc.local(word);
  std::uint64_t last = 0;
  const Status st = DeviceCommPort::wait_until(
      dc,
      [&](std::uint64_t& now) {
        now = dev::atomic_load(w, dev::Order::Acquire);
        last = now;
        return now >= value;
      },
      op, peer, word.offset, Cmp::Ge, value, site);
  if (seen != nullptr) *seen = last;
  return st;
}

/// This member's wait (bounded) until the flag `word` carries sequence number `seq`; no group
/// barrier. `*flag` gets the flag.
GNIO_HD inline Status wait_flag_member(const DeviceComm& dc, SymPtr<std::uint64_t> word,
                                       std::uint32_t seq, const char* op, int peer, CallSite site,
                                       std::uint64_t* flag) {
  return wait_seq(dc, dc.local(word), word.offset, seq, dev::Order::Acquire, op, peer, site, flag);
}

/// wait_flag_member() for every member, then one group barrier: the members agree whether the
/// wait succeeded (DeviceComm::group_status).
template <class Coop>
GNIO_HD Status wait_flag(const DeviceComm& dc, SymPtr<std::uint64_t> word, std::uint32_t seq,
                         const char* op, int peer, CallSite site, std::uint64_t* flag) {
  return dc.group_status<Coop>(wait_flag_member(dc, word, seq, op, peer, site, flag));
}

}  // namespace detail

/// Sends `bytes` from `src` (memory this rank's threads can read; through the proxy, more than
/// 256 bytes must be global memory) as one message on `ch`. Waits (bounded) while the peer's ring
/// is full. On return `src` may be reused. Returns Ok, or the failure a report describes.
template <class Coop = Thread>
GNIO_HD Status send(const Channel& ch, const void* src, std::size_t bytes, CallSite site = {}) {
  if (!detail::channel_valid(ch, "send", site)) return Status::InvalidArgument;
  const DeviceChannels& s = *ch.set;
  const DeviceComm& dc = s.comm;
  const Coop g{};
  const int me = dc.rank();
  const std::uint64_t mine = detail::pair_index(ch, ch.peer);  // my counters for the peer
  const std::uint64_t theirs = detail::pair_index(ch, me);     // my pair in the peer's arrays
  std::uint64_t* sent = dc.local(s.sent + mine);
  const char* from = static_cast<const char*>(src);
  std::size_t at = 0;
  // The counter and the credit are loaded back to back, so both round trips overlap; only a full
  // ring (rare) then waits for a newer credit.
  std::uint64_t n = dev::atomic_load(sent, dev::Order::Relaxed);
  std::uint64_t credited = dev::atomic_load(dc.local(s.credits + mine), dev::Order::Acquire);
  do {
    const std::size_t piece = bytes - at < s.max_message ? bytes - at : s.max_message;
    // The slot is free once the receiver consumed the message `depth` before this one. Each
    // member that has not yet seen that credit waits for it itself, then one group barrier (the
    // same count whatever each saw: tiles of one warp share the host backend's barrier).
    if (n + 1 > s.depth) {
      const std::uint64_t needed = n + 1 - s.depth;
      Status st = Status::Ok;
      if (credited < needed)
        st = detail::wait_word_member(dc, s.credits + mine, needed, "send (credit)", ch.peer, site,
                                      &credited);
      st = dc.group_status<Coop>(st);
      if (st != Status::Ok) return st;
    }
    const std::uint64_t slot = theirs * s.depth + detail::ring_slot(s, n);
    const bool more = at + piece < bytes;
    const std::uint64_t flag = (static_cast<std::uint64_t>(detail::slot_seq(n)) << 32) |
                               (more ? detail::kSlotMore : 0) | static_cast<std::uint64_t>(piece);
    if (detail::travels_as_packets(s, ch.peer, piece, more)) {
      g.sync();  // every member's writes of the source come first (as in every group operation)
      detail::store_packets(dc.peer_ptr(s.ll + slot * s.ll_cells, ch.peer), from + at, piece,
                            detail::slot_seq(n), g);
      // No fence: the cells carry their own arrival; the flag only says which kind of slot came.
      if (g.leader())
        dev::atomic_store(dc.peer_ptr(s.flags + slot, ch.peer), flag, dev::Order::Relaxed);
    } else if (piece > 0)
      dc.put_signal<Coop>(s.rings.byte_offset(slot * s.slot_bytes), from + at, piece,
                          s.flags + slot, flag, SignalOp::Set, ch.peer, site);
    else if (g.leader())
      dc.signal(s.flags + slot, flag, SignalOp::Set, ch.peer, site);
    ++n;
    at += piece;
  } while (at < bytes);
  // Every member read the counter before the leader moves it: put_signal's (and packets') group
  // barrier saw to that, but a zero-byte message is the leader's signal alone.
  if (bytes == 0) g.sync();
  if (g.leader()) dev::atomic_store(sent, n, dev::Order::Relaxed);
  g.sync();  // the group's next send reads the new count
  return Status::Ok;
}

namespace detail {

/// Takes the message whose first slot is `first` (already arrived: `flag`), copying it into
/// `dst` up to `max_bytes`; consumes every slot of it and credits the sender.
template <class Coop>
GNIO_HD Received take_message(const Channel& ch, std::uint64_t n, std::uint64_t flag, void* dst,
                              std::size_t max_bytes, const char* op, CallSite site) {
  const DeviceChannels& s = *ch.set;
  const DeviceComm& dc = s.comm;
  const Coop g{};
  const std::uint64_t pair = pair_index(ch, ch.peer);
  const std::uint64_t back = pair_index(ch, dc.rank());
  Received r;
  r.arrived = true;
  char* to = static_cast<char*>(dst);
  for (;;) {
    const std::uint64_t slot = pair * s.depth + ring_slot(s, n);
    const std::size_t piece = static_cast<std::size_t>(flag & kSlotBytesMask);
    // Past the buffer: nothing more is copied, and the failure is reported (which fails the
    // communicator, as every device error does).
    if (r.bytes + piece > max_bytes) {
      DeviceCommPort::report(dc, Status::InvalidArgument, op, ch.peer,
                             s.rings.offset + slot * s.slot_bytes, max_bytes, r.bytes + piece,
                             Cmp::Le, 0, site);
      r.status = Status::InvalidArgument;
      r.arrived = false;
      break;
    }
    const bool packets = travels_as_packets(s, ch.peer, piece, (flag & kSlotMore) != 0);
    Status st = Status::Ok;
    if (packets) {
      // Every member waits for its own cells (the barrier below makes the group agree).
      const SymPtr<std::uint64_t> cells = s.ll + slot * s.ll_cells;
      st = take_packets(dc, dc.local(cells), cells.offset, to + r.bytes, piece, slot_seq(n), op,
                        ch.peer, site, g);
    } else if (piece > 0) {
      group_copy(to + r.bytes, dc.local(s.rings.byte_offset(slot * s.slot_bytes)), piece, g);
    }
    // Only this rank's receives read `consumed`, each after the barrier below: stored before it,
    // the store leaves the message's path. (Stored even when a member's packet wait failed: that
    // failure is reported, and a failed communicator receives nothing more.)
    if (g.leader()) dev::atomic_store(dc.local(s.consumed + pair), n + 1, dev::Order::Relaxed);
    // Every member is done with the slot before the sender may reuse it; with packets, the
    // members also agree that every cell came (one barrier either way).
    if (packets)
      st = dc.group_status<Coop>(st);
    else
      g.sync();
    if (st != Status::Ok) {
      r.status = st;
      r.arrived = false;  // not whole
      break;
    }
    r.bytes += piece;
    ++n;
    // Credits go back every credit_interval() slots, not each one. The sender still never waits
    // on a receiver that has consumed everything (see credit_interval()). Over peer memory the
    // credit is a plain store (dev::kCreditOrder: every member's reads of the slot were used
    // before the barrier above), not a signal's system-wide release, which waited for this
    // rank's earlier stores into the peer's memory to be acknowledged; through the proxy it is a
    // signal, which the proxy orders after everything this rank sent before.
    if (g.leader() && (n & (credit_interval(s) - 1)) == 0) {
      if (dc.is_p2p(ch.peer))
        dev::atomic_store(dc.peer_ptr(s.credits + back, ch.peer), n, dev::kCreditOrder);
      else
        dc.signal(s.credits + back, n, SignalOp::Set, ch.peer, site);
    }
    if ((flag & kSlotMore) == 0) return r;  // whole; the barrier above ordered `consumed`
    // The next slot of the same message.
    const std::uint64_t next = pair * s.depth + ring_slot(s, n);
    st = wait_flag<Coop>(dc, s.flags + next, slot_seq(n), op, ch.peer, site, &flag);
    if (st != Status::Ok) {
      r.status = st;
      r.arrived = false;  // not whole
      break;
    }
  }
  g.sync();
  return r;
}

}  // namespace detail

namespace detail {

/// recv() and try_recv(): `wait` says whether to wait for the next message to start.
template <class Coop>
GNIO_HD Received receive(const Channel& ch, void* dst, std::size_t max_bytes, bool wait,
                         const char* op, CallSite site) {
  Received r;
  if (!channel_valid(ch, op, site)) {
    r.status = Status::InvalidArgument;
    return r;
  }
  const DeviceChannels& s = *ch.set;
  const DeviceComm& dc = s.comm;
  const std::uint64_t pair = pair_index(ch, ch.peer);
  const std::uint64_t n = dev::atomic_load(dc.local(s.consumed + pair), dev::Order::Relaxed);
  const SymPtr<std::uint64_t> flag_word = s.flags + (pair * s.depth + ring_slot(s, n));
  const std::uint32_t first = slot_seq(n);  // the sequence number of message n's first slot
  // A slot's flag changes only after this receiver credits the slot, so every member that saw
  // the message holds the same flag value.
  std::uint64_t flag = 0;
  if (wait) {
    r.status = wait_flag<Coop>(dc, flag_word, first, op, ch.peer, site, &flag);
    if (r.status != Status::Ok) return r;
  } else {
    flag = dev::atomic_load(dc.local(flag_word), dev::Order::Acquire);
    // Every member agrees whether it is there (the flag may land between two members' loads:
    // one that saw it late reads it again, after a member that saw it; a flag only changes from
    // its slot's previous number to this one).
    if (!Coop{}.any(flag_seq(flag) == first)) return r;
    if (flag_seq(flag) != first) flag = dev::atomic_load(dc.local(flag_word), dev::Order::Acquire);
  }
  return take_message<Coop>(ch, n, flag, dst, max_bytes, op, site);
}

}  // namespace detail

/// Waits (bounded) for the next message on `ch` and copies it into `dst`. A message larger than
/// `max_bytes` is InvalidArgument: nothing is written past `max_bytes` (whole slots that fit may
/// be), and the report names both sizes (expected = max_bytes, seen = the size it reached); as
/// with every device error, the communicator fails with it.
template <class Coop = Thread>
GNIO_HD Received recv(const Channel& ch, void* dst, std::size_t max_bytes, CallSite site = {}) {
  return detail::receive<Coop>(ch, dst, max_bytes, true, "recv", site);
}

/// recv() that does not wait for a message to start: arrived == false when none has. (Once a
/// message of several slots has started, it waits for the rest of it.)
template <class Coop = Thread>
GNIO_HD Received try_recv(const Channel& ch, void* dst, std::size_t max_bytes, CallSite site = {}) {
  return detail::receive<Coop>(ch, dst, max_bytes, false, "try_recv", site);
}

/// Sends `count` messages on `ch` (srcs[i], sizes[i]) one after another: as count send() calls,
/// with the credit waits of a full ring only.
template <class Coop = Thread>
GNIO_HD Status send_batch(const Channel& ch, const void* const* srcs, const std::size_t* sizes,
                          std::size_t count, CallSite site = {}) {
  for (std::size_t i = 0; i < count; ++i)
    if (const Status st = send<Coop>(ch, srcs[i], sizes[i], site); st != Status::Ok) return st;
  return Status::Ok;
}

}  // namespace gnio
