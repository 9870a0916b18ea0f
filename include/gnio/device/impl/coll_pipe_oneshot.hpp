// OneShot on a team that spans nodes: peers on other nodes cannot be read directly, so every
// rank sends its input (its block for each member, for reduce_scatter and alltoall) to every
// member that needs it as pipe messages, one network hop instead of the ring's 2(n - 1). Every
// receiver combines the inputs in team order, so the result is bit-identical on every rank.
#pragma once

#include "gnio/device/impl/coll_pipe.hpp"

namespace gnio::detail {

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

}  // namespace gnio::detail
