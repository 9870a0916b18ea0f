// Definitions of CollComm's members (declared and documented in gnio/device/coll.hpp): the
// choice of algorithm and the call's execution. The synchronisation state and failure rules the
// algorithms share are described in coll_call.hpp; each algorithm is in a header of its own.
#pragma once

#include <type_traits>

#include "gnio/device/coll.hpp"
#include "gnio/device/impl/coll_call.hpp"
#include "gnio/device/impl/coll_direct.hpp"
#include "gnio/device/impl/coll_ll.hpp"
#include "gnio/device/impl/coll_pipe_oneshot.hpp"
#include "gnio/device/impl/coll_ring.hpp"

namespace gnio {
namespace detail {

/// n == 1: the result is the input.
template <class Coop>
GNIO_HD void self_exec(CollCall<Coop>& c) {
  const CollArgs& a = c.a;
  if (a.kind == CollKind::AllToAllV) {
    const AllToAllBlocks blocks(a, 1);
    grid_copy(c, blocks.recv_ptr(0), blocks.send_ptr(0), blocks.send_bytes(0));
  } else {
    grid_copy(c, a.out, a.in, a.bytes);
  }
}

/// ring_exec on a copy of the call. The ring's steps are out of line and take the call's
/// address, which would keep the call in local memory on every path of the kernel (the LL and
/// direct algorithms then reload its status from there after each wait); the copy keeps that to
/// the ring's own path.
template <class Coop, class T, class Ops>
GNIO_HD void ring_exec_apart(CollCall<Coop>& c) {
  CollCall<Coop> ring = c;
  ring_exec<Coop, T, Ops>(ring);
  c.st = ring.st;
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
      default: detail::ring_exec_apart<Coop, T, Ops>(c); break;
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
    detail::ring_exec_apart<Coop, T, Ops>(c);
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
/// reducing kinds, the root of rooted ones. The blocks of a gathered input (reduce_scatter,
/// alltoall) and output (allgather, alltoall) lie one block apart.
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
  if (kind == CollKind::ReduceScatter || kind == CollKind::AllToAll) a.in_stride = a.bytes;
  if (kind == CollKind::AllGather || kind == CollKind::AllToAll) a.out_stride = a.bytes;
  return a;
}
}  // namespace detail

template <class Coop, class Ops, class T, class Algo>
GNIO_HD Status CollComm::group_call(CallSite site, CollKind kind, Algo algo, const T* send, T* recv,
                                    std::size_t count, int root) const {
  if (count == 0) return Status::Ok;
  // Reducing kinds run on T with their operator; the others move bytes.
  using RunT = std::conditional_t<detail::kReduces<Ops>, T, std::uint8_t>;
  RedOp op = RedOp::Sum;
  if constexpr (detail::kReduces<Ops>) op = Ops::kOp;
  return run_algo<Coop, RunT, Ops, detail::kCompiledAlgo<Algo>>(
      detail::call_args(kind, algo, send, recv, count, op, root), 0, 1, site);
}

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::allreduce(const T* send, T* recv, std::size_t count, Op, Algo algo,
                                   CallSite site) const {
  return group_call<Coop, Op>(site, CollKind::AllReduce, algo, send, recv, count);
}

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::reduce_scatter(const T* send, T* recv, std::size_t recvcount, Op,
                                        Algo algo, CallSite site) const {
  return group_call<Coop, Op>(site, CollKind::ReduceScatter, algo, send, recv, recvcount);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::allgather(const T* send, T* recv, std::size_t sendcount, Algo algo,
                                   CallSite site) const {
  return group_call<Coop, detail::CopyOp>(site, CollKind::AllGather, algo, send, recv, sendcount);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::broadcast(const T* send, T* recv, std::size_t count, int root, Algo algo,
                                   CallSite site) const {
  return group_call<Coop, detail::CopyOp>(site, CollKind::Broadcast, algo, send, recv, count, root);
}

template <class Coop, class T, class Op, class Algo>
GNIO_HD Status CollComm::reduce(const T* send, T* recv, std::size_t count, Op, int root, Algo algo,
                                CallSite site) const {
  return group_call<Coop, Op>(site, CollKind::Reduce, algo, send, recv, count, root);
}

template <class Coop, class T, class Algo>
GNIO_HD Status CollComm::alltoall(const T* send, T* recv, std::size_t count, Algo algo,
                                  CallSite site) const {
  return group_call<Coop, detail::CopyOp>(site, CollKind::AllToAll, algo, send, recv, count);
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
