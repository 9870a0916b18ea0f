// Stream-ordered collectives: NCCL-style calls that enqueue gnio's own kernels on a stream.
//
//   gnio::allreduce(comm, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, stream);
//
// Semantics follow NCCL: every rank of the communicator calls the same collectives in the same
// order with the same counts, types, operators and roots; counts are per rank as NCCL defines
// them (reduce_scatter: elements each rank receives; allgather: elements each rank sends). In
// place: recv == send (allreduce, broadcast, reduce), recv == send + rank*recvcount elements
// (reduce_scatter), send == recv + rank*sendcount elements (allgather); alltoall(v) are never in
// place. Buffers are any device memory of this rank (host backend: any memory of the process):
// buffers inside the symmetric heap are used in place (zero-copy); others are staged through the
// channel's symmetric staging buffers by the algorithms that need peer access to them.
//
// A call validates its arguments before enqueuing anything (a bad one throws
// Error(InvalidArgument) and has no effect); count 0 is a no-op (except alltoallv, where a rank
// with nothing to send or receive still takes part). It never waits for the device, so it can be
// captured in a CUDA graph - except the first collective on a stream (per communicator), which
// sets up that stream's channel with the other ranks (call coll_prepare() before capturing).
//
// Concurrency: each stream used for collectives gets its own channel (scratch buffers and call
// counters) the first time it is used, up to GNIO_COLL_CHANNELS per communicator. Every rank must
// first use its streams for collectives in the same order, and issue each stream's collectives
// in the same order. Collectives on different streams may then run at the same time. A call
// captured into a CUDA graph keeps its stream's channel: do not run two graphs captured on one
// stream (or a graph and that stream) at the same time. Errors a kernel records (timeouts,
// unreachable peers) surface from Comm::synchronize / Comm::check.
//
// GNIO_CHECK=1 (debugging): each call first compares its collective, type, operator, count, root
// and call number across ranks through the bootstrap (a host round trip) and, when the ranks
// disagree, throws Error(InvalidArgument) on every rank, naming the ranks and values, with
// nothing enqueued. See docs/reliability.md.
//
// See docs/guide/collectives.md for the algorithms, when each is chosen, and determinism.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gnio/comm.hpp"
#include "gnio/device/coll.hpp"
#include "gnio/device/coll_types.hpp"
#include "gnio/stream.hpp"

namespace gnio {

const char* to_string(DataType t) noexcept;
const char* to_string(RedOp op) noexcept;
const char* to_string(CollAlgo a) noexcept;
const char* to_string(CollKind k) noexcept;

/// recv[i] = op over ranks of send[i], for i < count.
void allreduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
               StreamRef stream);
/// recv[i] = op over ranks of send[rank*recvcount + i], for i < recvcount.
void reduce_scatter(Comm& comm, const void* send, void* recv, std::size_t recvcount, DataType type,
                    RedOp op, StreamRef stream);
/// recv[r*sendcount + i] = rank r's send[i].
void allgather(Comm& comm, const void* send, void* recv, std::size_t sendcount, DataType type,
               StreamRef stream);
/// recv = root's send (send is read on the root only; it may be null elsewhere).
void broadcast(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, int root,
               StreamRef stream);
/// recv on the root = op over ranks of send (recv is written on the root only; null elsewhere is
/// fine).
void reduce(Comm& comm, const void* send, void* recv, std::size_t count, DataType type, RedOp op,
            int root, StreamRef stream);
/// recv[r*count + i] = rank r's send[rank*count + i].
void alltoall(Comm& comm, const void* send, void* recv, std::size_t count, DataType type,
              StreamRef stream);
/// Rank r's send_counts[rank] elements at its send + send_displs[rank] land at this rank's recv +
/// recv_displs[r]; recv_counts[r] must equal them. Spans have one entry per rank (elements). At
/// most 64 ranks (Unsupported beyond).
void alltoallv(Comm& comm, const void* send, std::span<const std::size_t> send_counts,
               std::span<const std::size_t> send_displs, void* recv,
               std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
               DataType type, StreamRef stream);

/// Sets up the collective channel of `stream` now. Collective (every rank, same order of
/// streams); host-synchronising. Call it before capturing the first collective on a stream.
void coll_prepare(Comm& comm, StreamRef stream);

/// The device handle for collectives inside kernels over `team` (world by default), on the
/// channel of `stream`: run those kernels on `stream` (or keep them from overlapping with the
/// stream's collectives). Sets the channel up when needed (see coll_prepare).
CollComm coll_comm(Comm& comm, StreamRef stream, const Team& team);
CollComm coll_comm(Comm& comm, StreamRef stream);

/// Overrides GNIO_ALGO for this communicator: "auto", "ll", "oneshot", "twoshot", "ring", or a
/// comma list of them and of `collective:algorithm` pairs (collective = allreduce,
/// reduce_scatter, allgather, broadcast, reduce, alltoall, alltoallv). A bare algorithm applies to
/// every collective that has it; a pair names one collective and must be one it has. Every rank
/// must set the same. Throws InvalidArgument (no effect) for an unknown name or pair.
void coll_set_algorithm(Comm& comm, const std::string& spec);

/// The algorithm a collective of `count` elements of `type` runs with now (after GNIO_ALGO /
/// coll_set_algorithm and Auto's size rules) when it runs over the whole communicator at once;
/// for tests and benchmarks. See coll_hierarchical for a call split into parts.
CollAlgo coll_algorithm(Comm& comm, CollKind kind, std::size_t count, DataType type);

/// True when a collective of `count` elements of `type` runs hierarchically now: an allreduce or
/// an allgather on a job of at least 2 nodes with the same number (at least 2) of ranks each (an
/// allgather also needs each node's ranks consecutive), under GNIO_COLL_HIER
/// (auto: from GNIO_COLL_HIER_MIN bytes — allreduce's buffer, allgather's output — unless the
/// collective's algorithm is forced). An allreduce then runs as a reduce_scatter inside each node,
/// an allreduce of each rank's block with the ranks of its index on the other nodes, and an
/// allgather inside each node, each part with the algorithm its own size and team choose; the
/// count % ranks-per-node elements left over run as one allreduce over every rank. An allgather
/// runs with the ranks of its index on the other nodes, then inside each node, once per node.
/// Results are the same bits on every rank.
bool coll_hierarchical(Comm& comm, CollKind kind, std::size_t count, DataType type);

}  // namespace gnio
