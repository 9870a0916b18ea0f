// Ring: every member's data travels around the team through pipes to the next member.
#pragma once

#include "gnio/device/impl/coll_pipe.hpp"

namespace gnio::detail {

/// Ring alltoall and alltoallv (data-movement kernels only): pairwise pipes; step (j, k) sends
/// slice j of the block for me+k, then receives slice j of the block from me-k.
template <class Coop>
GNIO_HD void ring_alltoall_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  const int n = c.n, me = c.me;
  const std::size_t cu = c.cc.ch.pipe_chunk / kUnit;  // units per message
  const unsigned gr = c.g.rank(), gs = c.g.size();
  const AllToAllBlocks blocks(a, n);
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
    const std::size_t bytes = blocks.send_bytes(me);
    const std::size_t U = units_of(bytes);
    std::size_t b, e;
    c.my_units(U, &b, &e);
    const char* s = blocks.send_ptr(me);
    char* d = blocks.recv_ptr(me);
    if (s != d)
      for (std::size_t u = b + gr; u < e; u += gs) store_unit(d, u, bytes, load_unit(s, u, bytes));
  }
  std::size_t jmax = 0;
  for (int m = 0; m < n; ++m) {
    if (m == me) continue;
    const std::size_t s1 = slices(blocks.send_bytes(m)), s2 = slices(blocks.recv_bytes(m));
    jmax = s1 > jmax ? s1 : jmax;
    jmax = s2 > jmax ? s2 : jmax;
  }
  for (std::size_t j = 0; j < jmax; ++j) {
    for (int k = 1; k < n; ++k) {
      const int d = (me + k) % n, s = mod(me - k, n);
      // send slice j to d
      if (const std::size_t bytes = blocks.send_bytes(d); j < slices(bytes)) {
        PipeOut<Coop> po(c, d);
        po.sent = j;
        std::size_t lo, hi;
        slice_units(bytes, j, &lo, &hi);
        char* slot = po.acquire();
        const char* src = blocks.send_ptr(d);
        for (std::size_t u = lo + gr; u < hi; u += gs)
          store_pack(slot + (u - lo) * kUnit, load_unit(src, u, bytes));
        c.agree();
        po.post((hi - lo) * kUnit);
      }
      // receive slice j from s
      if (const std::size_t bytes = blocks.recv_bytes(s); j < slices(bytes)) {
        PipeIn<Coop> pi(c, s);
        pi.got = j;
        std::size_t lo, hi;
        slice_units(bytes, j, &lo, &hi);
        const char* slot = pi.wait();
        char* dst = blocks.recv_ptr(s);
        for (std::size_t u = lo + gr; u < hi; u += gs)
          store_unit(dst, u, bytes, load_pack(slot + (u - lo) * kUnit));
        c.agree();
        pi.release();
      }
    }
  }
  for (int k = 1; k < n; ++k) {
    const int d = (me + k) % n, s = mod(me - k, n);
    PipeOut<Coop> po(c, d);
    po.sent = slices(blocks.send_bytes(d));
    po.drain();
    PipeIn<Coop> pi(c, s);
    pi.got = slices(blocks.recv_bytes(s));
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

}  // namespace gnio::detail
