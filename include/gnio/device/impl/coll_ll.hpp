// LL: packets into the peers' scratch; no handshake.
#pragma once

#include "gnio/device/impl/coll_call.hpp"

namespace gnio::detail {

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

}  // namespace gnio::detail
