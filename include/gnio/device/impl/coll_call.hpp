// One collective call as one worker sees it (CollCall) and what every algorithm shares: progress
// and LL flag values, the out-of-line waits, part arithmetic and copies. The algorithms are in
// coll_ll.hpp, coll_direct.hpp, coll_ring.hpp and coll_pipe_oneshot.hpp; CollComm's members,
// which pick and run them, in coll_impl.hpp.
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

#include <type_traits>

#include "gnio/device/coll.hpp"
#include "gnio/device/impl/coll_pack.hpp"

namespace gnio::detail {

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
  const Status st = DeviceCommPort::wait_until(
      dc,
      [&](std::uint64_t& seen) {
        seen = last = dev::atomic_load(p, dev::Order::Acquire);
        return seen >= value;
      },
      op, peer, offset, Cmp::Ge, value, site);
  if (st != Status::Ok || last != kCollPoison) return st;
  DeviceCommPort::report(dc, Status::RemoteError, op, peer, offset, value, last, Cmp::Ge, 0, site);
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
  r.st = DeviceCommPort::wait_until(
      dc, [&](std::uint64_t& seen) { return ll_try_load(pkt, flag, &r.data, &seen); }, op, peer,
      offset, Cmp::Eq, flag, site);
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
  /// wait_ge_at on a word of this rank's landing inbox (host memory, read over the bus), for the
  /// whole group: a group larger than a warp has its leader poll and meets after it, every member
  /// with the same status. A warp's loads of one word are one bus read; a block's are one per
  /// warp, and a kernel's blocks polling so take the link from the landing data they then read.
  /// (The barrier orders the members' reads of that data after the leader's acquire.)
  GNIO_HD_INLINE void wait_landed(std::uint64_t offset, std::uint64_t value, int peer_member) {
    if constexpr (std::is_same_v<Coop, Block>) {
      if (g.leader()) wait_ge_at(land_word(offset), offset, value, peer_member);
      agree();
    } else {
      wait_ge_at(land_word(offset), offset, value, peer_member);
    }
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
    DeviceCommPort::report(cc.dc, s, name, peer_member >= 0 ? world(peer_member) : -1, offset,
                           expected, seen, Cmp::Eq, 0, site);
  }
  /// The symmetric-heap offset of `p` on this rank, or kNotInHeap.
  GNIO_HD_INLINE std::uint64_t heap_offset(const void* p) const {
    const DeviceCommState& heap = DeviceCommPort::state(cc.dc);
    const char* base = cc.dc.local(SymPtr<char>{heap.heap_id_, 0, 0});
    const std::uintptr_t d =
        reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base);
    return p && reinterpret_cast<const char*>(p) >= base && d < heap.heap_bytes_ ? d : kNotInHeap;
  }
  /// Member m's copy of heap offset `off` as an address this rank can load and store.
  GNIO_HD_INLINE char* peer_at(int m, std::uint64_t off) const {
    return cc.dc.peer_ptr(SymPtr<char>{DeviceCommPort::state(cc.dc).heap_id_, 0, off}, world(m));
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

/// The blocks of an alltoall(v): the bytes and address of what this rank sends to member m and
/// of what it receives from m. Alltoallv's table (CollArgs::a2av) sizes and places every block;
/// alltoall's are a.bytes each, a stride apart.
struct AllToAllBlocks {
  const CollArgs& a;
  const std::uint64_t* t;  ///< a.a2av
  int n;                   ///< team size
  GNIO_HD_INLINE AllToAllBlocks(const CollArgs& args, int members)
      : a(args), t(args.a2av), n(members) {}
  GNIO_HD_INLINE std::size_t send_bytes(int m) const {
    return a.kind == CollKind::AllToAll ? a.bytes : static_cast<std::size_t>(t[m]) * a.elem_size;
  }
  GNIO_HD_INLINE std::size_t recv_bytes(int m) const {
    return a.kind == CollKind::AllToAll ? a.bytes
                                        : static_cast<std::size_t>(t[2 * n + m]) * a.elem_size;
  }
  GNIO_HD_INLINE const char* send_ptr(int m) const {
    return a.in + (a.kind == CollKind::AllToAll ? static_cast<std::size_t>(m) * a.in_stride
                                                : static_cast<std::size_t>(t[n + m]) * a.elem_size);
  }
  GNIO_HD_INLINE char* recv_ptr(int m) const {
    return a.out + (a.kind == CollKind::AllToAll
                        ? static_cast<std::size_t>(m) * a.out_stride
                        : static_cast<std::size_t>(t[3 * n + m]) * a.elem_size);
  }
};

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

}  // namespace gnio::detail
