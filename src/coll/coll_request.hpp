// The properties of each collective kind that validation, staging and the cross-rank check
// share, and one host collective call as the host side of the collectives passes it around
// (Request).
#pragma once

#include <cstddef>
#include <span>

#include "gnio/coll.hpp"

namespace gnio::detail {

inline bool reducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce;
}
/// Input (and output) hold one block per rank.
inline bool gathered_in(CollKind k) {
  return k == CollKind::ReduceScatter || k == CollKind::AllToAll;
}
inline bool gathered_out(CollKind k) {
  return k == CollKind::AllGather || k == CollKind::AllToAll;
}
/// True when TwoShot of collective k on n ranks pushes (stores into the peers' outputs, reads no
/// peer's input) rather than reduce-scatter + allgather: allgather, alltoall and the 2-rank
/// broadcast. The same rule as direct_exec's in gnio/device/impl/coll_direct.hpp.
inline bool twoshot_pushes(CollKind k, int n) {
  return gathered_out(k) || (k == CollKind::Broadcast && n == 2);
}

/// Largest byte count a call may describe (keeps every unit computation far from overflow).
constexpr std::size_t kMaxBytes = std::size_t{1} << 50;

/// One host collective call.
struct Request {
  CollKind kind = CollKind::AllReduce;
  DataType type = DataType::F32;
  RedOp op = RedOp::Sum;
  const char* send = nullptr;
  char* recv = nullptr;
  std::size_t count = 0;  ///< NCCL's count (per rank where NCCL says so); A2AV: unused
  int root = 0;
  /// Bytes between the blocks of a gathered output (0: count's bytes, NCCL's layout); set only by
  /// the hierarchical allgather's parts between the nodes, whose blocks lie strided in the user's.
  std::size_t out_stride = 0;
  std::span<const std::size_t> a2av[4];
};

/// A request for one of the public calls (the operator is ignored by those that do not reduce,
/// the root by those without one).
inline Request request(CollKind kind, DataType type, RedOp op, const void* send, void* recv,
                       std::size_t count, int root = 0) {
  Request r;
  r.kind = kind;
  r.type = type;
  r.op = op;
  r.send = static_cast<const char*>(send);
  r.recv = static_cast<char*>(recv);
  r.count = count;
  r.root = root;
  return r;
}

}  // namespace gnio::detail
