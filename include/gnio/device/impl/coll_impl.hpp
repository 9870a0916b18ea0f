// Definitions of CollComm's members (declared and documented in gnio/device/coll.hpp).
//
// Synchronisation state, per channel and per peer ("slot", indexed by world rank):
//  * epoch[slot]: how many calls this rank made with that peer on this channel. A call uses
//    E = epoch + 1 for the pair; both ranks of a pair count the same calls (every member of a
//    team counts every call of the team), so E agrees without communication. The worker that
//    finishes a call last stores the new epochs (a done counter elects it).
//  * LL slots alternate between two halves by the parity of E; the flag of call E differs from
//    the flag of call E - 2 that last used the half. Before writing into a peer's half, a sender
//    checks credit[peer] >= E - 2 (the peer finished call E - 2 with us): normally already true,
//    it only holds back a sender more than one call ahead (rooted collectives).
//  * head/tail[block][slot]: monotonic per-block flags (E << 32) + step, so a later call's values
//    exceed every earlier one's and nothing is ever reset. OneShot/TwoShot use head for "ready"
//    (step 1) and "done" (step 2); Ring pipes use head for messages posted and tail for messages
//    consumed, and a sender drains its pipes (all consumed) before the call ends, so every call
//    starts with empty pipes. A pipe to a peer on another node is the same protocol carried by
//    the proxies through their landing regions (host memory, CollChannel::land_in/land_out): a
//    message is written into its sub-slot of this rank's outbox and sent with put_signal (data,
//    then the head word in the receiver's inbox), its consumption comes back as a signal on the
//    tail word in the sender's inbox; its message numbers run on from call to call
//    (land_count), so it is not drained at the end of a call.
//
// Failures: a call that failed on a rank (a wait timed out, the communicator was aborted, a bad
// argument) must not let its peers finish with wrong data. Before the group publishes anything
// that vouches for data (a pipe message posted or consumed, "done" of OneShot/TwoShot, the LL
// credit) it agrees on its status (CollCall::agree: a failure of any member is everyone's), and a
// failed call publishes kCollPoison instead of progress. A peer's wait that sees it ends with
// RemoteError naming this rank (wait_ge_slow), so every rank of a call that failed anywhere
// returns an error, except where what it got is right by construction: LL packets carry their
// call's flag, so a rank that got every packet has the right result and may return Ok.
#pragma once

#include "gnio/device/coll.hpp"
#include "gnio/device/impl/coll_pack.hpp"

namespace gnio {
namespace detail {

/// Flag value of step `step` of pair call `epoch` (head/tail words).
GNIO_HD_INLINE std::uint64_t progress(std::uint64_t epoch, std::uint64_t step) {
  return (epoch << 32) + step;
}
/// LL flag of pair call `epoch`: never 0 (fresh memory) and different from epoch - 2's.
GNIO_HD_INLINE std::uint32_t ll_flag(std::uint64_t epoch) {
  return static_cast<std::uint32_t>(epoch % 0xffffffffull) + 1u;
}
/// First element of part `i` of `parts` near-equal parts of `total`.
/// (total * i must fit 64 bits: units and worker/member counts keep it far below.)
GNIO_HD_INLINE std::size_t part_begin(std::size_t total, std::size_t parts, std::size_t i) {
  return total * i / parts;
}
GNIO_HD_INLINE int mod(int a, int n) {
  return ((a % n) + n) % n;
}

GNIO_HD_INLINE const char* coll_op_name(CollKind k, CollAlgo a) {
  static constexpr const char* kNames[kCollKindCount][kCollAlgoCount] = {
      {"allreduce", "allreduce(ll)", "allreduce(oneshot)", "allreduce(twoshot)", "allreduce(ring)"},
      {"reduce_scatter", "reduce_scatter(ll)", "reduce_scatter(oneshot)", "reduce_scatter(twoshot)",
       "reduce_scatter(ring)"},
      {"allgather", "allgather(ll)", "allgather(oneshot)", "allgather(twoshot)", "allgather(ring)"},
      {"broadcast", "broadcast(ll)", "broadcast(oneshot)", "broadcast(twoshot)", "broadcast(ring)"},
      {"reduce", "reduce(ll)", "reduce(oneshot)", "reduce(twoshot)", "reduce(ring)"},
      {"alltoall", "alltoall(ll)", "alltoall(oneshot)", "alltoall(twoshot)", "alltoall(ring)"},
      {"alltoallv", "alltoallv(ll)", "alltoallv(oneshot)", "alltoallv(twoshot)",
       "alltoallv(ring)"}};
  return kNames[static_cast<int>(k)][static_cast<int>(a)];
}

/// What a rank whose call failed publishes instead of progress (see the top of this file): above
/// every progress value, so that every wait for progress ends, and never a progress value.
inline constexpr std::uint64_t kCollPoison = ~std::uint64_t{0};

/// The part of a wait that spins: kept out of line (one copy per kernel instead of one per wait
/// site; a wait that has to spin has time for a call). The caller has already looked once. A
/// poison mark from the peer ends it with RemoteError naming that peer.
GNIO_NOINLINE GNIO_HD inline Status wait_ge_slow(const DeviceComm& dc, const std::uint64_t* p,
                                                 std::uint64_t value, const char* op, int peer,
                                                 std::uint64_t offset, CallSite site) {
  std::uint64_t last = 0;
  const Status st = dc.wait_until(
      [&](std::uint64_t& seen) {
        seen = last = dev::atomic_load(p, dev::Order::Acquire);
        return seen >= value;
      },
      op, peer, offset, Cmp::Ge, value, site);
  if (st != Status::Ok || last != kCollPoison) return st;
  dc.report(Status::RemoteError, op, peer, offset, value, last, Cmp::Ge, 0, site);
  return Status::RemoteError;
}

/// A unit of LL packets and how the wait for it ended.
struct LLUnit {
  Pack data;
  Status st;
};
/// Waits until the 4 packets at `pkt` carry `flag` (out of line, as wait_ge_slow).
GNIO_NOINLINE GNIO_HD inline LLUnit ll_wait_slow(const DeviceComm& dc, const std::uint64_t* pkt,
                                                 std::uint32_t flag, const char* op, int peer,
                                                 std::uint64_t offset, CallSite site) {
  LLUnit r{Pack{0, 0}, Status::Ok};
  r.st = dc.wait_until([&](std::uint64_t& seen) { return ll_try_load(pkt, flag, &r.data, &seen); },
                       op, peer, offset, Cmp::Eq, flag, site);
  return r;
}

/// One call as seen by one worker (one group of the caller).
template <class Coop>
struct CollCall {
  const CollComm& cc;
  const CollArgs& a;
  Coop g;
  int n = 0;   ///< team size
  int me = 0;  ///< team index
  unsigned w = 0, W = 1;
  CallSite site;
  const char* name = "";
  const std::uint64_t* epochs = nullptr;
  Status st = Status::Ok;

  GNIO_HD CollCall(const CollComm& c, const CollArgs& args, unsigned worker, unsigned workers,
                   CallSite s)
      : cc(c), a(args), n(c.team.size), me(c.team.index), w(worker), W(workers), site(s) {
    name = coll_op_name(a.kind, a.algo);
    epochs = cc.dc.local(cc.ch.epoch);
  }

  GNIO_HD_INLINE int world(int m) const { return cc.team.world_rank(m); }
  /// Member m's index in the channel's per-peer arrays that any member may use (epochs, the
  /// landing pipes' words): its world rank.
  GNIO_HD_INLINE int slot(int m) const { return world(m); }
  /// Member m's index in the channel's arrays that only members on this node use (head, tail,
  /// addr, credit, LL packets, pipes through peer memory): its index on the node, so that those
  /// arrays grow with the ranks of a node, not with the job. Only for members on this node.
  GNIO_HD_INLINE int node_slot(int m) const { return cc.dc.local_index(world(m)); }
  /// True when member m is on another node (reached through the proxy, not peer memory).
  GNIO_HD_INLINE bool proxied(int m) const { return !cc.dc.is_p2p(world(m)); }
  /// This call's number for the pair (me, m).
  GNIO_HD_INLINE std::uint64_t epoch(int m) const { return epochs[slot(m)] + 1; }
  /// Index of this thread among all threads of all workers, and their number.
  GNIO_HD_INLINE std::size_t tid() const { return std::size_t{w} * g.size() + g.rank(); }
  GNIO_HD_INLINE std::size_t nthreads() const { return std::size_t{W} * g.size(); }
  /// Per-block flag word [w][node_slot(m)] of `array` (head/tail; m on this node).
  GNIO_HD_INLINE SymPtr<std::uint64_t> flag(SymPtr<std::uint64_t> array, int m) const {
    return array + static_cast<std::ptrdiff_t>(std::size_t{w} * cc.ch.node_slots + node_slot(m));
  }

  /// Waits until this rank's `word` >= value (acquire); skipped after a failure.
  GNIO_HD_INLINE void wait_ge(SymPtr<std::uint64_t> word, std::uint64_t value, int peer_member) {
    wait_ge_at(cc.dc.local(word), word.offset, value, peer_member);
  }
  /// wait_ge on a word anywhere this rank reaches (a landing inbox's flags); `offset` names it in
  /// a timeout's report.
  GNIO_HD_INLINE void wait_ge_at(const std::uint64_t* p, std::uint64_t offset, std::uint64_t value,
                                 int peer_member) {
    if (st != Status::Ok) return;
    if (const std::uint64_t v = dev::atomic_load(p, dev::Order::Acquire);
        v >= value && v != kCollPoison)
      return;
    st = wait_ge_slow(cc.dc, p, value, name, peer_member >= 0 ? world(peer_member) : -1, offset,
                      site);
  }
  /// A group barrier after which every member has the same status: Ok only when it is Ok on
  /// every member, otherwise one of the members' failures (the same one everywhere). Every
  /// publication of progress follows one, so a leader never vouches for data that another member
  /// failed to move. (On the success path it costs what the plain barrier it replaces costs.)
  GNIO_HD_INLINE void agree() {
    if (!g.any(st != Status::Ok)) return;
    agree_on_failure();
  }
  GNIO_HD void agree_on_failure() {
    // The most specific failure any member has, the same on every member.
    if (g.any(st == Status::RemoteError))
      st = Status::RemoteError;
    else if (g.any(st == Status::Aborted))
      st = Status::Aborted;
    else if (g.any(st == Status::Timeout))
      st = Status::Timeout;
    else if (g.any(st == Status::InvalidArgument))
      st = Status::InvalidArgument;
    else if (g.any(st == Status::Unsupported))
      st = Status::Unsupported;
    else
      st = Status::Aborted;  // (a status this code never sets)
  }
  /// The value to publish for progress `value`: itself, or kCollPoison once the call failed.
  GNIO_HD_INLINE std::uint64_t mark(std::uint64_t value) const {
    return st == Status::Ok ? value : kCollPoison;
  }
  /// Offset in the landing inbox of the head (tail) word of this worker's pipe from member m.
  GNIO_HD_INLINE std::uint64_t land_flag(bool tail, int m) const {
    const CollChannel& ch = cc.ch;
    return ch.land_flags + ((std::uint64_t{tail} * ch.pipe_blocks + w) * ch.slots + slot(m)) *
                               sizeof(std::uint64_t);
  }
  /// This rank's landing word at inbox offset `offset`.
  GNIO_HD_INLINE std::uint64_t* land_word(std::uint64_t offset) const {
    return reinterpret_cast<std::uint64_t*>(cc.ch.land_in + offset);
  }
  /// This worker's count of messages sent to (`in`: received from) member m over a proxied pipe
  /// in the calls so far (CollChannel::land_count).
  GNIO_HD_INLINE std::uint64_t* land_count(bool in, int m) const {
    const CollChannel& ch = cc.ch;
    return cc.dc.local(ch.land_count) + (std::uint64_t{in} * ch.pipe_blocks + w) * ch.slots +
           slot(m);
  }
  /// Descriptor flags of a put into the peers' landing inboxes of this channel.
  GNIO_HD_INLINE std::uint32_t land_desc_flags(bool host_source) const {
    return (cc.ch.landing << kProxyRegionShift) | (host_source ? kProxyHostSource : 0u);
  }
  /// Publishes progress `value` (mark(value)) in member m's `word` with release (its earlier
  /// stores are visible first).
  GNIO_HD_INLINE void signal(SymPtr<std::uint64_t> word, std::uint64_t value, int m) const {
    dev::atomic_store(cc.dc.peer_ptr(word, world(m)), mark(value), dev::Order::Release);
  }
  /// Records a failure of this call (first one per communicator wins) and remembers it.
  GNIO_HD_INLINE void fail(Status s, int peer_member, std::uint64_t offset, std::uint64_t expected,
                           std::uint64_t seen) {
    if (st == Status::Ok) st = s;
    cc.dc.report(s, name, peer_member >= 0 ? world(peer_member) : -1, offset, expected, seen,
                 Cmp::Eq, 0, site);
  }
  /// The symmetric-heap offset of `p` on this rank, or kNotInHeap.
  GNIO_HD_INLINE std::uint64_t heap_offset(const void* p) const {
    const char* base = cc.dc.local(SymPtr<char>{cc.dc.heap_id_, 0, 0});
    const std::uintptr_t d =
        reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base);
    return p && reinterpret_cast<const char*>(p) >= base && d < cc.dc.heap_bytes_ ? d : kNotInHeap;
  }
  /// Member m's copy of heap offset `off` as an address this rank can load and store.
  GNIO_HD_INLINE char* peer_at(int m, std::uint64_t off) const {
    return cc.dc.peer_ptr(SymPtr<char>{cc.dc.heap_id_, 0, off}, world(m));
  }

  /// The units [begin, end) of `total` this worker owns (the same split on every rank).
  GNIO_HD_INLINE void my_units(std::size_t total, std::size_t* begin, std::size_t* end) const {
    *begin = part_begin(total, W, w);
    *end = part_begin(total, W, w + 1);
  }
};

/// Copies `bytes` from `src` to `dst` with all threads of all workers (local memory).
template <class Coop>
GNIO_HD_INLINE void grid_copy(const CollCall<Coop>& c, char* dst, const char* src,
                              std::size_t bytes) {
  if (dst == src || bytes == 0) return;
  const std::size_t U = units_of(bytes);
  for (std::size_t u = c.tid(); u < U; u += c.nthreads())
    store_unit(dst, u, bytes, load_unit(src, u, bytes));
}

/// The group copies units [ub, ue) of a `bytes`-long buffer, kUnroll units per thread in flight.
template <class Coop>
GNIO_HD_INLINE void copy_range(const Coop& g, char* dst, const char* src, std::size_t bytes,
                               std::size_t ub, std::size_t ue) {
  constexpr int kUnroll = 4;
  const std::size_t gs = g.size();
  for (std::size_t u0 = ub + g.rank(); u0 < ue; u0 += gs * kUnroll) {
    Pack p[kUnroll];
    GNIO_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const std::size_t u = u0 + k * gs;
      p[k] = u < ue ? load_unit(src, u, bytes) : Pack{0, 0};
    }
    GNIO_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const std::size_t u = u0 + k * gs;
      if (u < ue) store_unit(dst, u, bytes, p[k]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// LL: packets into the peers' scratch; no handshake.

template <class Coop, class T, class Ops>
GNIO_HD void ll_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  const CollChannel& ch = c.cc.ch;
  const int n = c.n, me = c.me;
  char* ll_local = c.cc.dc.local(ch.ll);
  auto slot_base = [&](char* area, std::uint64_t e, int s) {
    return reinterpret_cast<std::uint64_t*>(
        area + ((e & 1) * ch.node_slots + static_cast<std::uint64_t>(s)) * ch.ll_slot_bytes);
  };
  // Sends `bytes` of `src` to member m as packets.
  auto send = [&](int m, const char* src, std::size_t bytes) {
    const std::uint64_t e = c.epoch(m);
    if (e > 2)
      c.wait_ge(ch.credit + c.node_slot(m), e - 2, m);  // m is done with this half's last use
    if (c.st != Status::Ok) return;                     // m may still be reading that half
    std::uint64_t* dst = slot_base(c.cc.dc.peer_ptr(ch.ll, c.world(m)), e, c.node_slot(me));
    const std::uint32_t f = ll_flag(e);
    const std::size_t U = units_of(bytes);
    for (std::size_t u = c.tid(); u < U; u += c.nthreads())
      ll_store(dst + 4 * u, load_unit(src, u, bytes), f);
  };
  // Unit u of member m's packets.
  auto recv = [&](int m, std::size_t u) {
    Pack p{0, 0};
    if (c.st != Status::Ok) return p;
    const std::uint64_t e = c.epoch(m);
    const std::uint64_t* pkt = slot_base(ll_local, e, c.node_slot(m)) + 4 * u;
    const std::uint32_t f = ll_flag(e);
    std::uint64_t seen = 0;
    if (ll_try_load(pkt, f, &p, &seen)) return p;
    const LLUnit r = ll_wait_slow(
        c.cc.dc, pkt, f, c.name, c.world(m),
        ch.ll.offset + static_cast<std::uint64_t>(reinterpret_cast<const char*>(pkt) - ll_local),
        c.site);
    c.st = r.st;
    return r.data;
  };

  if constexpr (kReduces<Ops>) {
    // AllReduce / Reduce / ReduceScatter: out = op over members, in team order.
    const bool rs = a.kind == CollKind::ReduceScatter;
    const bool rooted = a.kind == CollKind::Reduce;
    for (int k = 1; k < n; ++k) {
      const int m = (me + k) % n;
      if (rooted && m != a.root) continue;
      send(m, rs ? a.in + static_cast<std::size_t>(m) * a.in_stride : a.in, a.bytes);
    }
    if (rooted && me != a.root) return;
    const char* mine = rs ? a.in + static_cast<std::size_t>(me) * a.in_stride : a.in;
    const std::size_t U = units_of(a.bytes);
    visit_op<Ops>(a.op, [&](auto op) {
      for (std::size_t u = c.tid(); u < U; u += c.nthreads()) {
        Accum<T, decltype(op)> acc{};
        for (int m = 0; m < n; ++m) {
          const Pack p = m == me ? load_unit(mine, u, a.bytes) : recv(m, u);
          if (m == 0)
            acc.init(p);
          else
            acc.add(p);
        }
        store_unit(a.out, u, a.bytes, acc.out());
      }
    });
  } else {
    const bool a2a = a.kind == CollKind::AllToAll;
    const bool bcast = a.kind == CollKind::Broadcast;
    if (!bcast || me == a.root)
      for (int k = 1; k < n; ++k) {
        const int m = (me + k) % n;
        send(m, a2a ? a.in + static_cast<std::size_t>(m) * a.in_stride : a.in, a.bytes);
      }
    const std::size_t U = units_of(a.bytes);
    if (bcast) {
      if (me == a.root)
        grid_copy(c, a.out, a.in, a.bytes);
      else
        for (std::size_t u = c.tid(); u < U; u += c.nthreads())
          store_unit(a.out, u, a.bytes, recv(a.root, u));
      return;
    }
    // AllGather / AllToAll: block m of out from member m.
    for (int m = 0; m < n; ++m) {
      char* dst = a.out + static_cast<std::size_t>(m) * a.out_stride;
      if (m == me) {
        grid_copy(c, dst, a2a ? a.in + static_cast<std::size_t>(me) * a.in_stride : a.in, a.bytes);
        continue;
      }
      for (std::size_t u = c.tid(); u < U; u += c.nthreads())
        store_unit(dst, u, a.bytes, recv(m, u));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// OneShot / TwoShot: peers' buffers read (and, TwoShot, written) directly.

template <class Coop, class T, class Ops, bool kTwoShot>
GNIO_HD void direct_exec(CollCall<Coop>& c) {
  constexpr bool twoshot = kTwoShot;
  const CollArgs& a = c.a;
  const CollChannel& ch = c.cc.ch;
  const int n = c.n, me = c.me;
  const std::uint64_t in_off = c.heap_offset(a.in);
  const std::uint64_t out_off = c.heap_offset(a.out);

  // Ready: publish where my buffers are and how their blocks lie (a staged buffer's blocks are a
  // piece apart, a user's a whole block: members can differ), then wait for everyone's. The group
  // barrier first makes the group's own writes of the input (device-side callers) visible with
  // the release.
  c.g.sync();
  for (int k = static_cast<int>(c.g.rank()); k < n; k += static_cast<int>(c.g.size())) {
    if (k == me) continue;
    std::uint64_t* slot = c.cc.dc.peer_ptr(
        ch.addr + static_cast<std::ptrdiff_t>(kCollAddrWords *
                                              (std::size_t{c.w} * ch.node_slots + c.node_slot(me))),
        c.world(k));
    dev::atomic_store(slot, in_off, dev::Order::Relaxed);
    dev::atomic_store(slot + 1, out_off, dev::Order::Relaxed);
    dev::atomic_store(slot + 2, std::uint64_t{a.in_stride}, dev::Order::Relaxed);
    dev::atomic_store(slot + 3, std::uint64_t{a.out_stride}, dev::Order::Relaxed);
    c.signal(c.flag(ch.head, me), progress(c.epoch(k), 1), k);
  }
  for (int k = static_cast<int>(c.g.rank()); k < n; k += static_cast<int>(c.g.size()))
    if (k != me) c.wait_ge(c.flag(ch.head, k), progress(c.epoch(k), 1), k);
  c.agree();

  // Member m's input (which = 0) or output (1) base as this rank addresses it; nullptr when m's
  // is not in the heap (then the call fails on every rank that needs it instead of hanging).
  // The offsets are read once per thread; members beyond kCache are looked up on every use.
  const std::uint64_t* addr = c.cc.dc.local(ch.addr);
  auto published = [&](int m, int word) {
    return dev::atomic_load(
        const_cast<std::uint64_t*>(
            addr + kCollAddrWords * (std::size_t{c.w} * ch.node_slots + c.node_slot(m)) + word),
        dev::Order::Relaxed);
  };
  auto lookup = [&](int m, int which) -> char* {
    if (m == me) return which == 0 ? const_cast<char*>(a.in) : a.out;
    const std::uint64_t off = published(m, which);
    return off == kNotInHeap ? nullptr : c.peer_at(m, off);
  };
  // Bytes between the blocks of member m's input (which = 0) or output (1), as m laid them out.
  auto stride_of = [&](int m, int which) -> std::size_t {
    if (m == me) return which == 0 ? a.in_stride : a.out_stride;
    return static_cast<std::size_t>(published(m, 2 + which));
  };
  constexpr int kCache = 8;
  char* in_cache[kCache];
  char* out_cache[kCache];
  for (int m = 0; m < n && m < kCache; ++m) {
    in_cache[m] = lookup(m, 0);
    out_cache[m] = lookup(m, 1);
  }
  auto peer_buf = [&](int m, int which) -> char* {
    char* p = m < kCache ? (which == 0 ? in_cache[m] : out_cache[m]) : lookup(m, which);
    if (!p && c.st == Status::Ok && c.g.leader())
      c.fail(Status::InvalidArgument, m, kNotInHeap, 0, 0);
    if (!p) c.st = Status::InvalidArgument;
    return p;
  };
  // In place, peers may still read the input this rank overwrites: OneShot AllReduce writes a
  // temporary (the channel's output staging) and copies it out after everyone is done reading.
  const bool temp = !twoshot && a.kind == CollKind::AllReduce && a.out == a.in;
  char* dst = temp ? c.cc.dc.local(ch.stage_out) : a.out;
  if (temp && a.bytes > ch.stage_bytes && c.st == Status::Ok)
    c.fail(Status::InvalidArgument, -1, kNotInHeap, a.bytes, ch.stage_bytes);
  // TwoShot of the data-movement collectives pushes instead of pulling: every rank stores its own
  // data into the peers' outputs (allgather, alltoall) or the root stores into every output
  // (broadcast on two ranks). NVLink stores are posted, loads wait for their replies, so pushing
  // moves more bytes per SM than pulling.
  const bool push = twoshot && (a.kind == CollKind::AllGather || a.kind == CollKind::AllToAll ||
                                (a.kind == CollKind::Broadcast && n == 2));
  // Peers read every input except non-roots' in a broadcast (and none when pushing); TwoShot
  // writes every output except non-roots' in a reduce.
  if (in_off == kNotInHeap && c.st == Status::Ok && !push &&
      !(a.kind == CollKind::Broadcast && me != a.root))
    c.fail(Status::InvalidArgument, -1, kNotInHeap, 0, 0);
  if (twoshot && out_off == kNotInHeap && c.st == Status::Ok &&
      !(a.kind == CollKind::Reduce && me != a.root))
    c.fail(Status::InvalidArgument, -1, kNotInHeap, 0, 0);

  const std::size_t U = units_of(a.bytes);
  // OneShot and pushes: this worker's share of all units; TwoShot reductions and the n > 2
  // broadcast: its share of chunk `me` (1/n of them).
  std::size_t lo = 0, hi = U;
  if (twoshot && !push) {
    lo = part_begin(U, n, me);
    hi = part_begin(U, n, me + 1);
  }
  const std::size_t ub = lo + part_begin(hi - lo, c.W, c.w),
                    ue = lo + part_begin(hi - lo, c.W, c.w + 1);
  if (c.st == Status::Ok) {
    if constexpr (kReduces<Ops>) {
      const bool rs = a.kind == CollKind::ReduceScatter;  // member m's block `me` is reduced
      const bool reduce_here = twoshot || a.kind != CollKind::Reduce || me == a.root;
      // Where the result goes: OneShot into dst; TwoShot AllReduce into every output; TwoShot
      // Reduce into the root's.
      char* root_out = twoshot && a.kind == CollKind::Reduce ? peer_buf(a.root, 1) : nullptr;
      const bool push_all = twoshot && a.kind == CollKind::AllReduce;
      if (reduce_here && c.st == Status::Ok)
        visit_op<Ops>(a.op, [&](auto op) {
          // kUnroll units per thread and kBatch members are loaded before they are reduced (in
          // member order), so that enough bytes are in flight to cover the peers' latency.
          // Every loop over the packs has a compile-time bound, so they stay in registers.
          constexpr int kUnroll = 4, kBatch = 2;
          const std::size_t gs = c.g.size();
          for (std::size_t u0 = ub + c.g.rank(); u0 < ue; u0 += gs * kUnroll) {
            Accum<T, decltype(op)> acc[kUnroll] = {};
            for (int m0 = 0; m0 < n; m0 += kBatch) {
              Pack p[kBatch][kUnroll];
              GNIO_UNROLL
              for (int j = 0; j < kBatch; ++j) {
                const char* src = m0 + j < n ? peer_buf(m0 + j, 0) : nullptr;
                if (src && rs) src += static_cast<std::size_t>(me) * stride_of(m0 + j, 0);
                GNIO_UNROLL
                for (int k = 0; k < kUnroll; ++k) {
                  const std::size_t u = u0 + k * gs;
                  p[j][k] = src && u < ue ? load_unit(src, u, a.bytes) : Pack{0, 0};
                }
              }
              GNIO_UNROLL
              for (int j = 0; j < kBatch; ++j) {
                if (m0 + j >= n) break;
                GNIO_UNROLL
                for (int k = 0; k < kUnroll; ++k) {
                  if (m0 + j == 0)
                    acc[k].init(p[j][k]);
                  else
                    acc[k].add(p[j][k]);
                }
              }
            }
            GNIO_UNROLL
            for (int k = 0; k < kUnroll; ++k) {
              const std::size_t u = u0 + k * gs;
              if (u >= ue) break;
              const Pack r = acc[k].out();
              if (!twoshot) {
                store_unit(dst, u, a.bytes, r);
              } else if (root_out) {
                store_unit(root_out, u, a.bytes, r);
              } else if (push_all) {
                for (int q = 0; q < n; ++q) {
                  char* o = peer_buf((me + q) % n, 1);
                  if (o) store_unit(o, u, a.bytes, r);
                }
              }
            }
          }
        });
    } else if (push) {
      // Allgather: this rank's input into block `me` of every output; alltoall: block m of the
      // input into block `me` of member m's output; broadcast: the root's input into every output.
      const bool a2a = a.kind == CollKind::AllToAll;
      const bool bcast = a.kind == CollKind::Broadcast;
      if (!bcast || me == a.root)
        for (int k = 0; k < n; ++k) {
          const int m = (me + k) % n;
          char* o = peer_buf(m, 1);
          if (!o) continue;
          if (!bcast) o += static_cast<std::size_t>(me) * stride_of(m, 1);
          const char* src = a.in + (a2a ? static_cast<std::size_t>(m) * a.in_stride : 0);
          if (o != src) copy_range(c.g, o, src, a.bytes, ub, ue);
        }
    } else if (a.kind == CollKind::Broadcast) {
      const char* src = peer_buf(a.root, 0);
      if (src && twoshot) {  // fetch chunk `me` from the root once, store it into every output
        constexpr int kUnroll = 4;
        const std::size_t gs = c.g.size();
        for (std::size_t u0 = ub + c.g.rank(); u0 < ue; u0 += gs * kUnroll) {
          Pack p[kUnroll];
          GNIO_UNROLL
          for (int k = 0; k < kUnroll; ++k) {
            const std::size_t u = u0 + k * gs;
            p[k] = u < ue ? load_unit(src, u, a.bytes) : Pack{0, 0};
          }
          for (int q = 0; q < n; ++q) {
            char* o = peer_buf((me + q) % n, 1);
            if (!o || o == src) continue;
            GNIO_UNROLL
            for (int k = 0; k < kUnroll; ++k) {
              const std::size_t u = u0 + k * gs;
              if (u < ue) store_unit(o, u, a.bytes, p[k]);
            }
          }
        }
      } else if (src && a.out != src) {
        copy_range(c.g, a.out, src, a.bytes, ub, ue);
      }
    } else {  // AllGather / AllToAll: block m of out from member m
      const bool a2a = a.kind == CollKind::AllToAll;
      for (int k = 0; k < n; ++k) {
        const int m = (me + k) % n;
        const char* src = peer_buf(m, 0);
        if (!src) continue;
        src += a2a ? static_cast<std::size_t>(me) * stride_of(m, 0) : 0;
        char* o = a.out + static_cast<std::size_t>(m) * a.out_stride;
        if (o != src) copy_range(c.g, o, src, a.bytes, ub, ue);
      }
    }
  }

  // Done: this worker finished reading (and writing) the peers' buffers (or failed: then the
  // peers see the poison mark instead); wait until every peer has finished with this rank's.
  c.agree();
  for (int k = static_cast<int>(c.g.rank()); k < n; k += static_cast<int>(c.g.size()))
    if (k != me) c.signal(c.flag(ch.head, me), progress(c.epoch(k), 2), k);
  for (int k = static_cast<int>(c.g.rank()); k < n; k += static_cast<int>(c.g.size()))
    if (k != me) c.wait_ge(c.flag(ch.head, k), progress(c.epoch(k), 2), k);
  c.agree();
  if (temp && c.st == Status::Ok) copy_range(c.g, a.out, dst, a.bytes, ub, ue);
}

// ---------------------------------------------------------------------------------------------
// Ring: pipes through the peers' scratch with flow control.

/// The sending end of this worker's pipe to member d: message i goes into sub-slot i % depth of
/// this rank's area in d's scratch once d consumed message i - depth. To a peer on another node
/// the pipe runs through the proxies' landing regions instead, with no GPU work on the way: the
/// group writes the message into sub-slot i % depth of this worker's outbox (host memory), this
/// rank's proxy sends it from there into the same sub-slot of d's inbox and sets the head word
/// there; d's consumption comes back as the tail word in this rank's inbox. The post does not
/// wait for the proxy: d consumed message i - depth only after the proxy sent it, so the wait for
/// room covers the outbox sub-slot too. Such a pipe also runs on from call to call
/// (message numbers count every call's messages, kept in CollChannel::land_count), so a call ends
/// without waiting for the network round trip of its last message's consumption: the next call
/// waits for it only when it needs that sub-slot.
template <class Coop>
struct PipeOut {
  CollCall<Coop>* c = nullptr;
  int d = 0;
  std::uint64_t e = 0, sent = 0;
  char* base = nullptr;      ///< d's sub-slots (p2p) or this worker's outbox sub-slots (proxied)
  std::uint64_t remote = 0;  ///< offset of this rank's sub-slots in d's scratch (proxied: inbox)
  bool proxied = false;
  std::uint64_t* count = nullptr;  ///< proxied: messages to d in earlier calls (this worker)
  std::uint64_t before = 0;        ///< *count when this call began (p2p: 0)
  GNIO_HD PipeOut(CollCall<Coop>& call, int dst)
      : c(&call), d(dst), e(call.epoch(dst)), proxied(call.proxied(dst)) {
    const CollChannel& ch = call.cc.ch;
    // A pipe's sub-slots [peer][worker][depth]: in the landing regions by world rank, in peer
    // memory by index on the node.
    const std::uint64_t per_worker = std::uint64_t{ch.pipe_depth} * ch.pipe_chunk;
    const std::uint64_t per_peer = std::uint64_t{ch.pipe_blocks} * per_worker;
    const std::uint64_t worker = std::uint64_t{call.w} * per_worker;
    if (proxied) {
      remote = static_cast<std::uint64_t>(call.slot(call.me)) * per_peer + worker;
      base = ch.land_out + static_cast<std::uint64_t>(call.slot(dst)) * per_peer + worker;
    } else {
      const std::uint64_t mine =
          static_cast<std::uint64_t>(call.node_slot(call.me)) * per_peer + worker;
      remote = ch.pipe.offset + mine;
      base = call.cc.dc.peer_ptr(ch.pipe, call.world(dst)) + mine;
    }
    if (proxied) {
      count = call.land_count(false, dst);
      before = *count;
    }
  }
  /// Waits until d consumed message `i` - 1 (and every earlier one); `i` counts this call's
  /// messages (proxied: every call's).
  GNIO_HD void wait_consumed(std::uint64_t i) {
    if (proxied) {
      const std::uint64_t t = c->land_flag(true, d);
      c->wait_ge_at(c->land_word(t), t, i, d);
    } else {
      c->wait_ge(c->flag(c->cc.ch.tail, d), progress(e, i), d);
    }
  }
  /// Waits for room; where to write the next message.
  GNIO_HD char* acquire() {
    const CollChannel& ch = c->cc.ch;
    const std::uint64_t i = before + sent;
    if (i >= ch.pipe_depth) wait_consumed(i - ch.pipe_depth + 1);
    return base + (i % ch.pipe_depth) * ch.pipe_chunk;
  }
  /// After the group barrier that follows the writes: publishes the message (`bytes` of it).
  /// Called by every member of the group.
  GNIO_HD void post(std::size_t bytes) {
    const CollChannel& ch = c->cc.ch;
    const std::uint64_t at = ((before + sent) % ch.pipe_depth) * ch.pipe_chunk;
    ++sent;
    if (!proxied) {
      if (c->g.leader()) c->signal(c->flag(ch.head, c->me), progress(e, sent), d);
      return;
    }
    // Only a leader whose waits succeeded posts: after a failure the waits return at once, and
    // d may still be reading the sub-slot (the p2p path skips its stores the same way).
    // Without waiting for the proxy to send it: the group refills this outbox sub-slot only once
    // d consumed this message (acquire()), which d's proxy signals after this rank's proxy sent
    // it. (That chain runs through two proxy threads and the network; the proxy carries it in
    // the memory model too: a receiving thread acquires what every sending thread released after
    // its sends before it applies a landing signal.)
    // A failed call sends the poison mark alone (no data): d's wait for this message fails.
    const bool ok = c->st == Status::Ok;
    ProxyDesc desc = proxy_desc(ok ? ProxyOp::PutSignal : ProxyOp::Signal, c->world(d),
                                ok ? base + at : nullptr, ok ? remote + at : 0, ok ? bytes : 0,
                                c->land_flag(false, c->me), c->mark(before + sent), SignalOp::Set);
    desc.flags = c->land_desc_flags(ok);
    c->cc.dc.template proxy_put<Coop>(desc, false, c->name, c->site, true);
  }
  /// Ends the call's use of the pipe. p2p: waits until d consumed every message (so the next call
  /// starts with an empty pipe); proxied: records how many messages went (the next call goes on
  /// from there). Called by every member of the group.
  GNIO_HD void drain() {
    if (!proxied) {
      if (sent) wait_consumed(sent);
      return;
    }
    c->g.sync();  // every member has read `before`
    if (c->g.leader()) *count = before + sent;
    c->g.sync();
  }
};

/// The receiving end of this worker's pipe from member s (proxied: in this rank's inbox, with
/// message numbers running on from call to call as PipeOut's).
template <class Coop>
struct PipeIn {
  CollCall<Coop>* c = nullptr;
  int s = 0;
  std::uint64_t e = 0, got = 0;
  const char* base = nullptr;
  bool proxied = false;
  std::uint64_t* count = nullptr;  ///< proxied: messages from s in earlier calls (this worker)
  std::uint64_t before = 0;        ///< *count when this call began (p2p: 0)
  GNIO_HD PipeIn(CollCall<Coop>& call, int src)
      : c(&call), s(src), e(call.epoch(src)), proxied(call.proxied(src)) {
    const CollChannel& ch = call.cc.ch;
    const std::uint64_t theirs =
        ((static_cast<std::uint64_t>(proxied ? call.slot(src) : call.node_slot(src)) *
              ch.pipe_blocks +
          call.w) *
         ch.pipe_depth) *
        ch.pipe_chunk;
    base = (proxied ? ch.land_in : call.cc.dc.local(ch.pipe)) + theirs;
    if (proxied) {
      count = call.land_count(true, src);
      before = *count;
    }
  }
  /// Waits for the next message; its slot.
  GNIO_HD const char* wait() {
    if (proxied) {
      const std::uint64_t h = c->land_flag(false, s);
      c->wait_ge_at(c->land_word(h), h, before + got + 1, s);
    } else {
      c->wait_ge(c->flag(c->cc.ch.head, s), progress(e, got + 1), s);
    }
    return slot();
  }
  /// The slot of the next message (without waiting for it).
  GNIO_HD const char* slot() const {
    return base + ((before + got) % c->cc.ch.pipe_depth) * c->cc.ch.pipe_chunk;
  }
  /// After the group barrier that follows the reads: frees the slot.
  GNIO_HD void release() {
    ++got;
    if (!c->g.leader()) return;
    if (!proxied) {
      c->signal(c->flag(c->cc.ch.tail, c->me), progress(e, got), s);
      return;
    }
    // Into s's inbox, where its PipeOut waits for it.
    ProxyDesc desc = proxy_desc(ProxyOp::Signal, c->world(s), nullptr, 0, 0,
                                c->land_flag(true, c->me), c->mark(before + got), SignalOp::Set);
    desc.flags = c->land_desc_flags(false);
    (void)c->cc.dc.proxy_post(desc, false, c->name, c->site);
  }
  /// Ends the call's use of the pipe: proxied, records how many messages came (the next call goes
  /// on from there). Called by every member of the group.
  GNIO_HD void commit() {
    if (!proxied) return;
    c->g.sync();  // every member has read `before`
    if (c->g.leader()) *count = before + got;
    c->g.sync();
  }
};

/// A segment of a ring: `valid` bytes at `in` (this rank's input) and `out`.
struct Seg {
  const char* in;
  char* out;
  std::size_t valid;
};

/// Ring alltoall and alltoallv (data-movement kernels only): pairwise pipes; step (j, k) sends
/// slice j of the block for me+k, then receives slice j of the block from me-k.
template <class Coop>
GNIO_HD void ring_alltoall_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  const int n = c.n, me = c.me;
  const std::size_t cu = c.cc.ch.pipe_chunk / kUnit;  // units per message
  const unsigned gr = c.g.rank(), gs = c.g.size();
  const std::uint64_t* t = a.a2av;
  auto send_bytes = [&](int m) {
    return a.kind == CollKind::AllToAll ? a.bytes : static_cast<std::size_t>(t[m]) * a.elem_size;
  };
  auto recv_bytes = [&](int m) {
    return a.kind == CollKind::AllToAll ? a.bytes
                                        : static_cast<std::size_t>(t[2 * n + m]) * a.elem_size;
  };
  auto send_ptr = [&](int m) {
    return a.in + (a.kind == CollKind::AllToAll ? static_cast<std::size_t>(m) * a.in_stride
                                                : static_cast<std::size_t>(t[n + m]) * a.elem_size);
  };
  auto recv_ptr = [&](int m) {
    return a.out + (a.kind == CollKind::AllToAll
                        ? static_cast<std::size_t>(m) * a.out_stride
                        : static_cast<std::size_t>(t[3 * n + m]) * a.elem_size);
  };
  auto slices = [&](std::size_t bytes) {
    const std::size_t U = units_of(bytes);
    const std::size_t L = part_begin(U, c.W, c.w + 1) - part_begin(U, c.W, c.w);
    return (L + cu - 1) / cu;
  };
  // Units [*lo, *hi) of slice j of this worker's part of a block of `bytes`.
  auto slice_units = [&](std::size_t bytes, std::size_t j, std::size_t* lo, std::size_t* hi) {
    const std::size_t U = units_of(bytes);
    *lo = part_begin(U, c.W, c.w) + j * cu;
    const std::size_t end = part_begin(U, c.W, c.w + 1);
    *hi = *lo + cu < end ? *lo + cu : end;
  };
  {  // my own block
    const std::size_t bytes = send_bytes(me);
    const std::size_t U = units_of(bytes);
    std::size_t b, e;
    c.my_units(U, &b, &e);
    const char* s = send_ptr(me);
    char* d = recv_ptr(me);
    if (s != d)
      for (std::size_t u = b + gr; u < e; u += gs) store_unit(d, u, bytes, load_unit(s, u, bytes));
  }
  std::size_t jmax = 0;
  for (int m = 0; m < n; ++m) {
    if (m == me) continue;
    const std::size_t s1 = slices(send_bytes(m)), s2 = slices(recv_bytes(m));
    jmax = s1 > jmax ? s1 : jmax;
    jmax = s2 > jmax ? s2 : jmax;
  }
  for (std::size_t j = 0; j < jmax; ++j) {
    for (int k = 1; k < n; ++k) {
      const int d = (me + k) % n, s = mod(me - k, n);
      {  // send slice j to d
        const std::size_t bytes = send_bytes(d);
        if (j < slices(bytes)) {
          PipeOut<Coop> po(c, d);
          po.sent = j;
          std::size_t lo, hi;
          slice_units(bytes, j, &lo, &hi);
          char* slot = po.acquire();
          const char* src = send_ptr(d);
          for (std::size_t u = lo + gr; u < hi; u += gs)
            store_pack(slot + (u - lo) * kUnit, load_unit(src, u, bytes));
          c.agree();
          po.post((hi - lo) * kUnit);
        }
      }
      {  // receive slice j from s
        const std::size_t bytes = recv_bytes(s);
        if (j < slices(bytes)) {
          PipeIn<Coop> pi(c, s);
          pi.got = j;
          std::size_t lo, hi;
          slice_units(bytes, j, &lo, &hi);
          const char* slot = pi.wait();
          char* dst = recv_ptr(s);
          for (std::size_t u = lo + gr; u < hi; u += gs)
            store_unit(dst, u, bytes, load_pack(slot + (u - lo) * kUnit));
          c.agree();
          pi.release();
        }
      }
    }
  }
  for (int k = 1; k < n; ++k) {
    const int d = (me + k) % n, s = mod(me - k, n);
    PipeOut<Coop> po(c, d);
    po.sent = slices(send_bytes(d));
    po.drain();
    PipeIn<Coop> pi(c, s);
    pi.got = slices(recv_bytes(s));
    pi.commit();
  }
}

/// One worker's pipes around the ring and its units of every segment, sliced into messages.
template <class Coop, class T, class Ops>
struct RingRun {
  enum : unsigned { kRecv = 1, kMine = 2, kStore = 4, kSend = 8 };
  CollCall<Coop>& c;
  PipeOut<Coop> po;  ///< to the right neighbour
  PipeIn<Coop> pi;   ///< from the left neighbour
  std::size_t wlo = 0, whi = 0, cu = 0;

  /// One step on slice j: optionally receive (from the left), combine with this rank's segment
  /// `mine`, store into `store`, send (to the right). Out of line: a ring calls it from many
  /// places, and once per message a call costs nothing.
  GNIO_NOINLINE GNIO_HD void step(std::size_t j, unsigned what, Seg mine, Seg store) {
    const std::size_t lo = wlo + j * cu, hi = lo + cu < whi ? lo + cu : whi;
    const unsigned gr = c.g.rank(), gs = c.g.size();
    const char* rslot = (what & kRecv) ? pi.wait() : nullptr;
    char* sslot = (what & kSend) ? po.acquire() : nullptr;
    // kUnroll units per thread are loaded before any is combined or stored, so that their loads
    // are in flight together (a message from another node is read from host memory, over the
    // bus: one load's latency per unit would bound the pipe).
    constexpr int kUnroll = 4;
    auto put = [&](std::size_t u, const Pack& v) {
      if (what & kStore) store_unit(store.out, u, store.valid, v);
      if (what & kSend) store_pack(sslot + (u - lo) * kUnit, v);
    };
    if (c.st == Status::Ok) {
      bool combined = false;
      if constexpr (kReduces<Ops>) {
        if ((what & kRecv) && (what & kMine)) {
          combined = true;
          visit_op<Ops>(c.a.op, [&](auto op) {
            for (std::size_t u0 = lo + gr; u0 < hi; u0 += std::size_t{gs} * kUnroll) {
              Pack r[kUnroll], m[kUnroll];
              GNIO_UNROLL
              for (int k = 0; k < kUnroll; ++k) {
                const std::size_t u = u0 + k * std::size_t{gs};
                r[k] = u < hi ? load_pack(rslot + (u - lo) * kUnit) : Pack{0, 0};
                m[k] = u < hi ? load_unit(mine.in, u, mine.valid) : Pack{0, 0};
              }
              GNIO_UNROLL
              for (int k = 0; k < kUnroll; ++k) {
                const std::size_t u = u0 + k * std::size_t{gs};
                if (u >= hi) break;
                Accum<T, decltype(op)> acc{};
                acc.init(r[k]);
                acc.add(m[k]);
                put(u, acc.out());
              }
            }
          });
        }
      }
      if (!combined)
        for (std::size_t u0 = lo + gr; u0 < hi; u0 += std::size_t{gs} * kUnroll) {
          Pack v[kUnroll];
          GNIO_UNROLL
          for (int k = 0; k < kUnroll; ++k) {
            const std::size_t u = u0 + k * std::size_t{gs};
            v[k] = u >= hi          ? Pack{0, 0}
                   : (what & kRecv) ? load_pack(rslot + (u - lo) * kUnit)
                                    : load_unit(mine.in, u, mine.valid);
          }
          GNIO_UNROLL
          for (int k = 0; k < kUnroll; ++k) {
            const std::size_t u = u0 + k * std::size_t{gs};
            if (u >= hi) break;
            put(u, v[k]);
          }
        }
    }
    c.agree();
    if (what & kSend) po.post((hi - lo) * kUnit);
    if (what & kRecv) pi.release();
  }
};

template <class Coop, class T, class Ops>
GNIO_HD void ring_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  const int n = c.n, me = c.me;
  if constexpr (!kReduces<Ops>) {
    if (a.kind == CollKind::AllToAllV || a.kind == CollKind::AllToAll) {
      ring_alltoall_exec(c);
      return;
    }
  }
  // Segments: AllReduce splits the buffer into n; ReduceScatter / AllGather use the blocks.
  // Broadcast and Reduce are chains through the ring with one segment.
  const bool chain = a.kind == CollKind::Broadcast || a.kind == CollKind::Reduce;
  const std::size_t U = units_of(a.bytes);
  const std::size_t useg = chain ? U : a.kind == CollKind::AllReduce ? (U + n - 1) / n : U;
  auto seg = [&](int s) -> Seg {
    switch (a.kind) {
      case CollKind::AllReduce: {
        const std::size_t off = static_cast<std::size_t>(s) * useg * kUnit;
        const std::size_t valid =
            off >= a.bytes ? 0 : (a.bytes - off < useg * kUnit ? a.bytes - off : useg * kUnit);
        return {a.in + (off < a.bytes ? off : 0), a.out + (off < a.bytes ? off : 0), valid};
      }
      case CollKind::ReduceScatter:
        return {a.in + static_cast<std::size_t>(s) * a.in_stride, a.out, a.bytes};
      case CollKind::AllGather:
        return {a.in, a.out + static_cast<std::size_t>(s) * a.out_stride, a.bytes};
      default: return {a.in, a.out, a.bytes};
    }
  };
  using Run = RingRun<Coop, T, Ops>;
  Run r{c, PipeOut<Coop>(c, (me + 1) % n), PipeIn<Coop>(c, mod(me - 1, n))};
  r.cu = c.cc.ch.pipe_chunk / kUnit;  // units per message
  r.wlo = part_begin(useg, c.W, c.w);
  r.whi = part_begin(useg, c.W, c.w + 1);
  const std::size_t nslices = (r.whi - r.wlo + r.cu - 1) / r.cu;
  constexpr unsigned kRecv = Run::kRecv, kMine = Run::kMine, kStore = Run::kStore,
                     kSend = Run::kSend;

  for (std::size_t j = 0; j < nslices; ++j) {
    if constexpr (kReduces<Ops>) {
      if (a.kind == CollKind::Reduce) {  // a chain root+1 -> ... -> root
        const int q = mod(me - a.root - 1, n);
        const Seg s = seg(0);
        if (q == 0)
          r.step(j, kMine | kSend, s, s);
        else if (q < n - 1)
          r.step(j, kRecv | kMine | kSend, s, s);
        else
          r.step(j, kRecv | kMine | kStore, s, s);
        continue;
      }
      // AllReduce / ReduceScatter
      const bool ar = a.kind == CollKind::AllReduce;
      r.step(j, kMine | kSend, seg(mod(me - 1, n)), Seg{});
      for (int k = 1; k < n; ++k) {
        const Seg s = seg(mod(me - 1 - k, n));
        if (k < n - 1)
          r.step(j, kRecv | kMine | kSend, s, Seg{});
        else
          r.step(j, kRecv | kMine | kStore | (ar ? kSend : 0u), s, s);  // s is segment me
      }
      if (ar)
        for (int k = 1; k < n; ++k) {
          const Seg s = seg(mod(me - k, n));
          r.step(j, kRecv | kStore | (k < n - 1 ? kSend : 0u), s, s);
        }
    } else {
      if (a.kind == CollKind::AllGather) {
        const Seg own = seg(me);
        r.step(j, kMine | kSend | (own.out != own.in ? kStore : 0u), own, own);
        for (int k = 1; k < n; ++k) {
          const Seg s = seg(mod(me - k, n));
          r.step(j, kRecv | kStore | (k < n - 1 ? kSend : 0u), s, s);
        }
        continue;
      }
      // Broadcast: a chain root -> root+1 -> ...
      const int p = mod(me - a.root, n);
      const Seg s = seg(0);
      if (p == 0)
        r.step(j, kMine | kSend | (s.out != s.in ? kStore : 0u), s, s);
      else
        r.step(j, kRecv | kStore | (p < n - 1 ? kSend : 0u), s, s);
    }
  }
  r.po.drain();
  r.pi.commit();
}

// ---------------------------------------------------------------------------------------------
// OneShot on a team that spans nodes: peers on other nodes cannot be read directly, so every
// rank sends its input (its block for each member, for reduce_scatter and alltoall) to every
// member that needs it as pipe messages, one network hop instead of the ring's 2(n - 1). Every
// receiver combines the inputs in team order, so the result is bit-identical on every rank.

template <class Coop, class T, class Ops>
GNIO_HD void pipe_oneshot_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  const int n = c.n, me = c.me;
  const std::size_t cu = c.cc.ch.pipe_chunk / kUnit;  // units per message
  const unsigned gr = c.g.rank(), gs = c.g.size();
  const bool bcast = a.kind == CollKind::Broadcast, reduce = a.kind == CollKind::Reduce;
  const bool per_member_in = a.kind == CollKind::ReduceScatter || a.kind == CollKind::AllToAll;
  const bool gathered_out = a.kind == CollKind::AllGather || a.kind == CollKind::AllToAll;
  // Broadcast goes out from the root, reduce in to it, everything else from everyone to everyone.
  auto sends = [&](int from, int to) {
    return from != to && (bcast ? from == a.root : !reduce || to == a.root);
  };
  auto input_for = [&](int m) {
    return a.in + (per_member_in ? static_cast<std::size_t>(m) * a.in_stride : 0);
  };
  auto output_of = [&](int m) {
    return a.out + (gathered_out ? static_cast<std::size_t>(m) * a.out_stride : 0);
  };
  const std::size_t U = units_of(a.bytes);
  std::size_t wlo, whi;
  c.my_units(U, &wlo, &whi);
  const std::size_t nslices = (whi - wlo + cu - 1) / cu;
  // Member m's message of slice j (this rank's own input for m == me); looked up once per slice
  // for the first kCache members.
  constexpr int kCache = 8;
  const char* cached[kCache];
  auto message = [&](int m, std::size_t j) -> const char* {
    if (m == me) return input_for(me);
    PipeIn<Coop> pi(c, m);
    pi.got = j;
    return pi.slot();
  };

  for (std::size_t j = 0; j < nslices; ++j) {
    const std::size_t lo = wlo + j * cu, hi = lo + cu < whi ? lo + cu : whi;
    for (int k = 1; k < n; ++k) {
      const int d = (me + k) % n;
      if (!sends(me, d)) continue;
      PipeOut<Coop> po(c, d);
      po.sent = j;
      char* slot = po.acquire();
      const char* src = input_for(d);
      if (c.st == Status::Ok)
        for (std::size_t u = lo + gr; u < hi; u += gs)
          store_pack(slot + (u - lo) * kUnit, load_unit(src, u, a.bytes));
      c.agree();
      po.post((hi - lo) * kUnit);
    }
    for (int k = 1; k < n; ++k) {
      const int s = (me + k) % n;
      if (!sends(s, me)) continue;
      PipeIn<Coop> pi(c, s);
      pi.got = j;
      (void)pi.wait();
    }
    for (int m = 0; m < n && m < kCache; ++m) cached[m] = message(m, j);
    auto at = [&](int m, std::size_t u) {
      const char* base = m < kCache ? cached[m] : message(m, j);
      return m == me ? load_unit(base, u, a.bytes) : load_pack(base + (u - lo) * kUnit);
    };
    // kUnroll units per thread and member are loaded together (messages from other nodes are
    // read from host memory, over the bus), then combined in team order.
    constexpr int kUnroll = 4;
    const std::size_t step = std::size_t{gs} * kUnroll;
    // Units u0, u0 + gs, ... (kUnroll of them) of member m's message; zero past the slice.
    auto load_batch = [&](int m, std::size_t u0, Pack(&p)[kUnroll]) {
      GNIO_UNROLL
      for (int k = 0; k < kUnroll; ++k) {
        const std::size_t u = u0 + k * std::size_t{gs};
        p[k] = u < hi ? at(m, u) : Pack{0, 0};
      }
    };
    if (c.st == Status::Ok) {
      if constexpr (kReduces<Ops>) {
        if (!reduce || me == a.root)
          visit_op<Ops>(a.op, [&](auto op) {
            for (std::size_t u0 = lo + gr; u0 < hi; u0 += step) {
              Accum<T, decltype(op)> acc[kUnroll] = {};
              for (int m = 0; m < n; ++m) {
                Pack p[kUnroll];
                load_batch(m, u0, p);
                GNIO_UNROLL
                for (int k = 0; k < kUnroll; ++k) {
                  if (m == 0)
                    acc[k].init(p[k]);
                  else
                    acc[k].add(p[k]);
                }
              }
              GNIO_UNROLL
              for (int k = 0; k < kUnroll; ++k) {
                const std::size_t u = u0 + k * std::size_t{gs};
                if (u < hi) store_unit(a.out, u, a.bytes, acc[k].out());
              }
            }
          });
      } else {
        for (int m = 0; m < n; ++m) {
          if (m != me && !sends(m, me)) continue;
          if (m == me && bcast && me != a.root) continue;
          char* dst = output_of(m);
          if (m == me && dst == input_for(me)) continue;
          for (std::size_t u0 = lo + gr; u0 < hi; u0 += step) {
            Pack p[kUnroll];
            load_batch(m, u0, p);
            GNIO_UNROLL
            for (int k = 0; k < kUnroll; ++k) {
              const std::size_t u = u0 + k * std::size_t{gs};
              if (u < hi) store_unit(dst, u, a.bytes, p[k]);
            }
          }
        }
      }
    }
    c.agree();
    for (int k = 1; k < n; ++k) {
      const int s = (me + k) % n;
      if (!sends(s, me)) continue;
      PipeIn<Coop> pi(c, s);
      pi.got = j;
      pi.release();
    }
  }
  for (int k = 1; k < n; ++k) {
    const int d = (me + k) % n, s = mod(me - k, n);
    if (sends(me, d)) {
      PipeOut<Coop> po(c, d);
      po.sent = nslices;
      po.drain();
    }
    if (sends(s, me)) {
      PipeIn<Coop> pi(c, s);
      pi.got = nslices;
      pi.commit();
    }
  }
}

/// n == 1: the result is the input.
template <class Coop>
GNIO_HD void self_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  if (a.kind == CollKind::AllToAllV) {
    const std::uint64_t* t = a.a2av;
    grid_copy(c, a.out + t[3] * a.elem_size, a.in + t[1] * a.elem_size, t[0] * a.elem_size);
  } else {
    grid_copy(c, a.out, a.in, a.bytes);
  }
}

/// End of a call on this worker: the last worker stores the new epochs and tells every peer this
/// rank is done with the call (the LL credit).
template <class Coop>
GNIO_HD void finish(CollCall<Coop>& c) {
  c.agree();
  if (c.g.leader()) {
    bool last = true;
    if (c.W > 1) {
      std::uint32_t* done = c.cc.dc.local(c.cc.ch.done);
      last = dev::atomic_fetch_add(done, 1u, dev::Order::AcqRel) == c.W - 1;
      if (last) dev::atomic_store(done, 0u, dev::Order::Relaxed);
    }
    if (last) {
      std::uint64_t* epochs = c.cc.dc.local(c.cc.ch.epoch);
      for (int m = 0; m < c.n; ++m) {
        if (m == c.me) continue;
        const std::uint64_t e = c.epoch(m);
        epochs[c.slot(m)] = e;
        if (c.proxied(m)) continue;  // no LL with peers on other nodes: nothing to credit
        // The credit only has to follow this rank's reads of its own LL slot (what m overwrites
        // once it sees the credit), and every value read was used before the group barrier
        // above. So on GPUs it goes without a release: a system-scope release would wait for
        // this call's stores into the peers' memory (the LL packets) to be acknowledged, a
        // round trip over the link on every in-kernel call. CPU threads keep the release
        // (free on x86; on weaker CPUs it orders the reads formally).
        dev::atomic_store(c.cc.dc.peer_ptr(c.cc.ch.credit + c.node_slot(c.me), c.world(m)),
                          c.mark(e), dev::kCreditOrder);
      }
    }
  }
  c.g.sync();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Algorithm choice

GNIO_HD inline bool CollComm::supports(CollAlgo algo, const detail::CollArgs& a) const {
  switch (algo) {
    case CollAlgo::Auto: return true;
    case CollAlgo::Ring: return true;
    case CollAlgo::LL: return a.kind != CollKind::AllToAllV && a.bytes <= ch.ll_slot_bytes / 2;
    case CollAlgo::OneShot: return a.kind != CollKind::AllToAllV;
    case CollAlgo::TwoShot:
      return a.kind != CollKind::AllToAllV && a.kind != CollKind::ReduceScatter;
  }
  return false;
}

GNIO_HD inline bool CollComm::peer_memory() const {
  for (int m = 0; m < team.size; ++m)
    if (!dc.is_p2p(team.world_rank(m))) return false;
  return true;
}

GNIO_HD inline bool CollComm::through_pipes(CollAlgo algo) const {
  return algo == CollAlgo::Ring || (algo == CollAlgo::OneShot && !peer_memory());
}

GNIO_HD inline CollAlgo CollComm::choose(const detail::CollArgs& a) const {
  if (a.kind == CollKind::AllToAllV) return CollAlgo::Ring;
  const std::uint64_t n = static_cast<std::uint64_t>(team.size > 0 ? team.size : 1);
  // The larger of this rank's input and output.
  const bool gathered = a.kind == CollKind::AllGather || a.kind == CollKind::ReduceScatter ||
                        a.kind == CollKind::AllToAll;
  const std::uint64_t total = gathered ? a.bytes * n : a.bytes;
  if (!peer_memory()) return total <= remote_oneshot_max ? CollAlgo::OneShot : CollAlgo::Ring;
  if (total <= ll_max && supports(CollAlgo::LL, a)) return CollAlgo::LL;
  if (a.kind == CollKind::ReduceScatter) return CollAlgo::OneShot;
  return total <= oneshot_max ? CollAlgo::OneShot : CollAlgo::TwoShot;
}

// ---------------------------------------------------------------------------------------------
// Execution

template <class Coop, class T, class Ops, CollAlgo kAlgo>
GNIO_HD Status CollComm::run_algo(const detail::CollArgs& args, unsigned w, unsigned W,
                                  CallSite site) const {
  detail::CollArgs a = args;
  if (a.algo == CollAlgo::Auto) a.algo = choose(a);
  detail::CollCall<Coop> c(*this, a, w, W, site);
  // Arguments every rank checks the same way (no waits have started: nothing to undo).
  if (!team.contains_me() || team.size < 1) {
    if (c.g.leader()) c.fail(Status::InvalidArgument, -1, 0, 0, 0);
    return Status::InvalidArgument;
  }
  const bool pipes = through_pipes(a.algo);
  if (W == 0 || W > ch.max_blocks || (pipes && W > ch.pipe_blocks) || !supports(a.algo, a) ||
      (kAlgo != CollAlgo::Auto && a.algo != kAlgo) ||
      ((a.kind == CollKind::Broadcast || a.kind == CollKind::Reduce) &&
       (a.root < 0 || a.root >= team.size))) {
    // The record's "bytes" and "heap holds" numbers are the message and, for LL, what a slot
    // holds; "peer" is the root.
    if (c.g.leader())
      c.fail(Status::InvalidArgument, a.root >= 0 && a.root < team.size ? a.root : -1,
             detail::kNotInHeap, a.bytes, a.algo == CollAlgo::LL ? ch.ll_slot_bytes / 2 : 0);
    return Status::InvalidArgument;
  }
  if (!pipes)
    for (int m = 0; m < team.size; ++m)
      if (c.proxied(m)) {  // on another node: only pipes reach it (through the proxy)
        if (c.g.leader()) c.fail(Status::Unsupported, m, detail::kNotInHeap, 0, 0);
        return Status::Unsupported;
      }
  if (team.size == 1) {
    detail::self_exec(c);
    c.g.sync();
    return Status::Ok;
  }
  if constexpr (kAlgo == CollAlgo::Auto) {
    switch (a.algo) {
      case CollAlgo::LL: detail::ll_exec<Coop, T, Ops>(c); break;
      case CollAlgo::OneShot:
        if (pipes)
          detail::pipe_oneshot_exec<Coop, T, Ops>(c);
        else
          detail::direct_exec<Coop, T, Ops, false>(c);
        break;
      case CollAlgo::TwoShot: detail::direct_exec<Coop, T, Ops, true>(c); break;
      default: detail::ring_exec<Coop, T, Ops>(c); break;
    }
  } else if constexpr (kAlgo == CollAlgo::LL) {
    detail::ll_exec<Coop, T, Ops>(c);
  } else if constexpr (kAlgo == CollAlgo::OneShot) {
    if (pipes)
      detail::pipe_oneshot_exec<Coop, T, Ops>(c);
    else
      detail::direct_exec<Coop, T, Ops, false>(c);
  } else if constexpr (kAlgo == CollAlgo::TwoShot) {
    detail::direct_exec<Coop, T, Ops, true>(c);
  } else {
    detail::ring_exec<Coop, T, Ops>(c);
  }
  detail::finish(c);
  return c.st;
}

template <class Coop, class T, class Op>
GNIO_HD Status CollComm::run(const detail::CollArgs& args, unsigned w, unsigned W,
                             CallSite site) const {
  return run_algo<Coop, T, Op, CollAlgo::Auto>(args, w, W, site);
}

namespace detail {
/// The arguments of one device-side call: `count` elements of T per block, the operator of
/// reducing kinds, the root of rooted ones.
template <class T, class Algo>
GNIO_HD_INLINE CollArgs call_args(CollKind kind, Algo algo, const T* send, T* recv,
                                  std::size_t count, RedOp op = RedOp::Sum, int root = 0) {
  CollArgs a;
  a.kind = kind;
  a.algo = static_cast<CollAlgo>(algo);
  a.op = op;
  a.in = reinterpret_cast<const char*>(send);
  a.out = reinterpret_cast<char*>(recv);
  a.bytes = count * sizeof(T);
  a.root = root;
  return a;
}
}  // namespace detail

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::allreduce(const T* send, T* recv, std::size_t count, Op, Algo algo,
                                   CallSite site) const {
  if (count == 0) return Status::Ok;
  const detail::CollArgs a =
      detail::call_args(CollKind::AllReduce, algo, send, recv, count, Op::kOp);
  return run_algo<Coop, T, Op, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::reduce_scatter(const T* send, T* recv, std::size_t recvcount, Op,
                                        Algo algo, CallSite site) const {
  if (recvcount == 0) return Status::Ok;
  detail::CollArgs a =
      detail::call_args(CollKind::ReduceScatter, algo, send, recv, recvcount, Op::kOp);
  a.in_stride = a.bytes;
  return run_algo<Coop, T, Op, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::allgather(const T* send, T* recv, std::size_t sendcount, Algo algo,
                                   CallSite site) const {
  if (sendcount == 0) return Status::Ok;
  detail::CollArgs a = detail::call_args(CollKind::AllGather, algo, send, recv, sendcount);
  a.out_stride = a.bytes;
  return run_algo<Coop, std::uint8_t, detail::CopyOp, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::broadcast(const T* send, T* recv, std::size_t count, int root, Algo algo,
                                   CallSite site) const {
  if (count == 0) return Status::Ok;
  const detail::CollArgs a =
      detail::call_args(CollKind::Broadcast, algo, send, recv, count, RedOp::Sum, root);
  return run_algo<Coop, std::uint8_t, detail::CopyOp, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::reduce(const T* send, T* recv, std::size_t count, Op, int root, Algo algo,
                                CallSite site) const {
  if (count == 0) return Status::Ok;
  const detail::CollArgs a =
      detail::call_args(CollKind::Reduce, algo, send, recv, count, Op::kOp, root);
  return run_algo<Coop, T, Op, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::alltoall(const T* send, T* recv, std::size_t count, Algo algo,
                                  CallSite site) const {
  if (count == 0) return Status::Ok;
  detail::CollArgs a = detail::call_args(CollKind::AllToAll, algo, send, recv, count);
  a.in_stride = a.out_stride = a.bytes;
  return run_algo<Coop, std::uint8_t, detail::CopyOp, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::alltoallv(const T* send, T* recv, const std::uint64_t* table, Algo algo,
                                   CallSite site) const {
  detail::CollArgs a = detail::call_args(CollKind::AllToAllV, algo, send, recv, 0);
  a.elem_size = sizeof(T);
  a.a2av = table;
  return run_algo<Coop, std::uint8_t, detail::CopyOp, detail::kCompiledAlgo<Algo>>(a, 0, 1, site);
}

}  // namespace gnio
