// OneShot / TwoShot: peers' buffers read (and, TwoShot, written) directly.
#pragma once

#include "gnio/device/impl/coll_call.hpp"

namespace gnio::detail {

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

}  // namespace gnio::detail
