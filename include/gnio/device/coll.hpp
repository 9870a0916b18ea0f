// Collectives inside kernels: allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall
// and alltoallv over a Team, called by one cooperation group per rank (Thread, Tile<N>, Warp or
// Block) of an already running kernel. The host API (gnio/coll.hpp) launches the same code as
// stream-ordered kernels, with one block per worker.
//
//   gnio::CollComm cc = gnio::coll_comm(comm, stream);   // host: the channel of `stream`
//   gnio::launch(stream, dims, [=] GNIO_HD() {
//     if (gnio::dev::block() == 0)
//       (void)cc.allreduce<gnio::Block>(x, x, n, gnio::op::Sum{});   // in place
//   });
//
// Algorithms (CollAlgo; Auto picks by size):
//  * LL: every rank writes its data as 8-byte packets (4 bytes data + 4 bytes call flag) into the
//    peers' scratch and reads the peers' packets from its own; no barrier, nothing cleared. Small
//    messages (up to the scratch's LL slot).
//  * OneShot: a flag handshake, then every rank reads what it needs directly from the peers'
//    buffers (peer memory, 16-byte loads), then a flag saying it is done reading. Operands that
//    peers read must lie in the symmetric heap (any offset: ranks publish their offsets). On a
//    team that spans nodes every rank instead sends its input to every member that needs it as
//    pipe messages (Ring's pipes, through the proxy to other nodes): one network hop instead of
//    the ring's 2(n - 1), any buffers; Auto picks it there up to GNIO_COLL_REMOTE_ONESHOT_MAX.
//  * TwoShot (allreduce, broadcast, reduce): each rank reduces (or fetches) 1/n of the data from
//    every peer and writes it into every peer's output (reduce-scatter + allgather).
//  * Ring: pipelined through fixed-size scratch with per-block flow control; any size, any
//    buffers (nothing but this rank touches them). With OneShot the algorithm for teams that
//    span nodes: a message to a peer on another node is a put_signal through the proxy
//    (GNIO_NET), its consumption a signal back; Auto picks it there above
//    GNIO_COLL_REMOTE_ONESHOT_MAX, and LL and TwoShot return Unsupported.
//
// Determinism: LL, OneShot and TwoShot reduce every element in team order (member 0, 1, ..., n-1)
// with the same operations on every rank, so the result is bit-identical on every rank and
// between these three algorithms. Ring reduces each element once, in ring order, and copies the
// result: bit-identical on every rank, but possibly different bits from the others for floats.
// 16/8-bit floats accumulate in float within one rank (LL/OneShot/TwoShot round once; Ring rounds
// at every hop).
//
// Rules: one group per rank runs collectives on a channel at a time, and every member calls the
// same collectives in the same order. Every wait is bounded like DeviceComm's waits; a failure
// returns Status::Timeout/Aborted/InvalidArgument/Unsupported and records where it happened.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/coll_types.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/device/device_comm.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/sym_ptr.hpp"
#include "gnio/device/team.hpp"

namespace gnio {

/// Collective algorithm; Auto chooses by kind and size (the same choice on every rank).
enum class CollAlgo : std::uint8_t { Auto, LL, OneShot, TwoShot, Ring };
/// Number of CollAlgo values.
inline constexpr int kCollAlgoCount = 5;

/// A CollAlgo fixed at compile time. Passed where a collective takes its algorithm
/// (`cc.allreduce<gnio::Block>(x, x, n, gnio::op::Sum{}, gnio::algo::ring)`), it compiles that
/// algorithm alone into the calling kernel; a CollAlgo value compiles every algorithm, since Auto
/// (or the value) chooses at run time. Kernels that call several collectives build several times
/// faster and use fewer registers with tags.
template <CollAlgo A>
struct AlgoTag {
  static constexpr CollAlgo value = A;
  GNIO_HD constexpr operator CollAlgo() const { return A; }  // NOLINT: a tag is its algorithm
};
namespace algo {
inline constexpr AlgoTag<CollAlgo::Auto> automatic{};  ///< all algorithms, chosen at run time
inline constexpr AlgoTag<CollAlgo::LL> ll{};
inline constexpr AlgoTag<CollAlgo::OneShot> oneshot{};
inline constexpr AlgoTag<CollAlgo::TwoShot> twoshot{};
inline constexpr AlgoTag<CollAlgo::Ring> ring{};
}  // namespace algo

/// Which collective.
enum class CollKind : std::uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  AllToAll,
  AllToAllV
};
/// Number of CollKind values.
inline constexpr int kCollKindCount = 7;

namespace detail {

/// The algorithms a call compiles: every one for a CollAlgo (chosen at run time), one for a tag.
template <class Algo>
inline constexpr CollAlgo kCompiledAlgo = CollAlgo::Auto;
template <CollAlgo A>
inline constexpr CollAlgo kCompiledAlgo<AlgoTag<A>> = A;

/// Most workers (blocks) of one collective call; the per-block flags are sized by it.
inline constexpr unsigned kCollMaxBlocks = 256;
/// Most workers of a Ring call; the pipe slots are sized by it (fewer, larger slots).
inline constexpr unsigned kCollPipeBlocks = 16;
/// An offset that is not in the symmetric heap.
inline constexpr std::uint64_t kNotInHeap = ~std::uint64_t{0};
/// What a member publishes to each peer at the start of a direct (OneShot/TwoShot) call: its
/// input's and output's heap offsets, then the bytes between their blocks.
inline constexpr std::size_t kCollAddrWords = 4;

/// One channel of a communicator's collective state: symmetric buffers with the same layout on
/// every rank ("slots" are indexed by world rank). Filled by gnio::coll_comm().
struct CollChannel {
  // Arrays by peer: [slots] over every rank of the job (world rank), [node_slots] over the
  // ranks of one node (index on the node): only peers on this node use those, so they grow
  // with the node, not the job.
  SymPtr<std::uint64_t> epoch;   ///< [slots] calls made with each peer (local use)
  SymPtr<std::uint64_t> credit;  ///< [node_slots] peer i finished its call number X with this rank
  SymPtr<std::uint32_t> done;    ///< workers of the current call that finished (local use)
  SymPtr<std::uint64_t> head;    ///< [max_blocks][node_slots] progress flags written by senders
  SymPtr<std::uint64_t> tail;  ///< [max_blocks][node_slots] consumption flags written by receivers
  SymPtr<std::uint64_t> addr;  ///< [max_blocks][node_slots][kCollAddrWords] published by peers
  SymPtr<char> ll;             ///< [2][node_slots][ll_slot_bytes] LL packet slots
  SymPtr<char> pipe;           ///< [node_slots][pipe_blocks][pipe_depth][pipe_chunk] pipe slots
  /// Pipes to and from members on other nodes live in host memory of the proxies: landing region
  /// `landing` (0: the communicator spans one node), the same layout on every rank. `land_in`
  /// (this rank's inbox, which the peers' proxies write and device code here reads over the bus):
  /// [slots][pipe_blocks][pipe_depth][pipe_chunk] messages, then at `land_flags`
  /// [2][pipe_blocks][slots] head (messages posted) and tail (messages consumed) words.
  /// `land_out` (the outbox): [slots][pipe_blocks][pipe_depth][pipe_chunk], the messages a
  /// worker is sending to a peer, which this rank's proxy sends from there.
  char* land_in = nullptr;
  char* land_out = nullptr;
  /// [2][pipe_blocks][slots] messages each worker sent to (received from) each member over a
  /// landing pipe in all calls so far (local use; these pipes run on from call to call).
  SymPtr<std::uint64_t> land_count;
  std::uint64_t land_flags = 0;
  std::uint32_t landing = 0;
  SymPtr<char> stage_in;   ///< [stage_bytes] host API staging of inputs
  SymPtr<char> stage_out;  ///< [stage_bytes] staging of outputs / in-place temporaries
  std::uint64_t ll_slot_bytes = 0;
  std::uint64_t pipe_chunk = 0;
  std::uint64_t stage_bytes = 0;
  std::uint32_t pipe_depth = 0;
  std::uint32_t max_blocks = 0;   ///< most workers of a call
  std::uint32_t pipe_blocks = 0;  ///< most workers of a Ring call
  std::uint32_t slots = 0;        ///< ranks in the job
  std::uint32_t node_slots = 0;   ///< ranks on the largest node
  std::uint32_t id = 0;           ///< channel number (diagnostics)
};

/// Everything one collective call needs (built by CollComm's members and by the host API).
struct CollArgs {
  CollKind kind = CollKind::AllReduce;
  CollAlgo algo = CollAlgo::Auto;
  /// The reducing kinds' operator: what a kernel compiled for several (detail::AnyOp) applies.
  RedOp op = RedOp::Sum;
  const char* in = nullptr;     ///< this rank's input
  char* out = nullptr;          ///< this rank's output
  std::size_t bytes = 0;        ///< bytes per block: whole message (AR/Bcast/Reduce), one rank's
                                ///< block (RS output, AG input, A2A per peer); unused by A2AV
  std::size_t in_stride = 0;    ///< bytes between input blocks (RS, A2A)
  std::size_t out_stride = 0;   ///< bytes between output blocks (AG, A2A)
  int root = 0;                 ///< team index of the root (Bcast, Reduce)
  std::uint32_t elem_size = 1;  ///< bytes per element (A2AV counts are in elements)
  /// A2AV: [4][team size] send counts, send displacements, recv counts, recv displacements, in
  /// elements (memory the kernel can read).
  const std::uint64_t* a2av = nullptr;
};

}  // namespace detail

/// The device handle of collectives over one team on one channel. Trivially copyable; get it from
/// gnio::coll_comm() on the host and pass it to kernels by value.
struct CollComm {
  DeviceComm dc;
  Team team;
  detail::CollChannel ch;
  /// Auto's thresholds (GNIO_COLL_LL_MAX, GNIO_COLL_ONESHOT_MAX; on teams that span nodes
  /// GNIO_COLL_REMOTE_ONESHOT_MAX), in bytes of the larger buffer.
  std::uint64_t ll_max = 0;
  std::uint64_t oneshot_max = 0;
  std::uint64_t remote_oneshot_max = 0;

  // Every call: the whole group calls with the same arguments; `send`/`recv` are this rank's
  // buffers (device memory; in the symmetric heap when OneShot/TwoShot must read or write them
  // from peers). Counts follow NCCL. In place: recv == send (allreduce, broadcast, reduce);
  // recv == send + index*count (reduce_scatter: recv is this rank's block of send); send == recv
  // + index*count (allgather). Roots are team indices. Returns Ok on success. `algo` is a
  // CollAlgo (every algorithm compiled, one chosen at run time) or a tag from gnio::algo (that
  // algorithm alone compiled).

  /// recv[i] = op over members of send[i], i < count.
  template <class Coop = Block, class T, class Op, class Algo = CollAlgo>
  GNIO_HD Status allreduce(const T* send, T* recv, std::size_t count, Op op,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const;
  /// recv[i] = op over members of send[index*recvcount + i], i < recvcount.
  template <class Coop = Block, class T, class Op, class Algo = CollAlgo>
  GNIO_HD Status reduce_scatter(const T* send, T* recv, std::size_t recvcount, Op op,
                                Algo algo = CollAlgo::Auto, CallSite site = {}) const;
  /// recv[m*sendcount + i] = member m's send[i].
  template <class Coop = Block, class T, class Algo = CollAlgo>
  GNIO_HD Status allgather(const T* send, T* recv, std::size_t sendcount,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const;
  /// recv = root's send (send is read on the root only).
  template <class Coop = Block, class T, class Algo = CollAlgo>
  GNIO_HD Status broadcast(const T* send, T* recv, std::size_t count, int root,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const;
  /// recv on root = op over members of send (recv is written on the root only).
  template <class Coop = Block, class T, class Op, class Algo = CollAlgo>
  GNIO_HD Status reduce(const T* send, T* recv, std::size_t count, Op op, int root,
                        Algo algo = CollAlgo::Auto, CallSite site = {}) const;
  /// recv[m*count + i] = member m's send[index*count + i]. Not in place.
  template <class Coop = Block, class T, class Algo = CollAlgo>
  GNIO_HD Status alltoall(const T* send, T* recv, std::size_t count, Algo algo = CollAlgo::Auto,
                          CallSite site = {}) const;
  /// Member m's block for this rank (send_counts[index] elements at its send_displs[index]) lands
  /// at recv + recv_displs[m]. `table` is 4 arrays of team-size entries in device-readable
  /// memory: send counts, send displacements, recv counts, recv displacements (elements). Ring
  /// only (Auto = Ring). Not in place.
  template <class Coop = Block, class T, class Algo = CollAlgo>
  GNIO_HD Status alltoallv(const T* send, T* recv, const std::uint64_t* table,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const;

  /// Symmetric-pointer overloads of the above.
  template <class Coop = Block, class T, class Op, class Algo = CollAlgo>
  GNIO_HD Status allreduce(SymPtr<T> send, SymPtr<T> recv, std::size_t count, Op op,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const {
    return allreduce<Coop>(dc.local(send), dc.local(recv), count, op, algo, site);
  }
  template <class Coop = Block, class T, class Algo = CollAlgo>
  GNIO_HD Status allgather(SymPtr<T> send, SymPtr<T> recv, std::size_t sendcount,
                           Algo algo = CollAlgo::Auto, CallSite site = {}) const {
    return allgather<Coop>(dc.local(send), dc.local(recv), sendcount, algo, site);
  }

  /// The algorithm Auto picks for `a` on this team (the same on every rank).
  GNIO_HD CollAlgo choose(const detail::CollArgs& a) const;
  /// True when `algo` can run `a` (LL: fits a slot; TwoShot: all but reduce_scatter and
  /// alltoallv; A2AV: Ring only). Peer-memory requirements are peer_memory()'s.
  GNIO_HD bool supports(CollAlgo algo, const detail::CollArgs& a) const;
  /// True when this rank can load and store every member's memory (the team lies on one node):
  /// LL, TwoShot and OneShot's direct form need it; Ring does not.
  GNIO_HD bool peer_memory() const;
  /// True when `algo` moves data through the pipes on this team (Ring; OneShot when the team
  /// spans nodes), so that it runs with at most CollChannel::pipe_blocks workers.
  GNIO_HD bool through_pipes(CollAlgo algo) const;
  /// Runs one call as worker `w` of `W` (the host API's kernels: one block per worker, all blocks
  /// of the grid; the device API: one group, w = 0, W = 1). T/Op: element type and operator for
  /// the reducing kinds; std::uint8_t and detail::CopyOp for the others.
  template <class Coop, class T, class Op>
  GNIO_HD Status run(const detail::CollArgs& a, unsigned w, unsigned W, CallSite site) const;
  /// run() compiled for one algorithm only (kAlgo; Auto = all): the host API's kernels, so that
  /// each algorithm gets its own register allocation. a.algo must resolve to kAlgo.
  template <class Coop, class T, class Ops, CollAlgo kAlgo>
  GNIO_HD Status run_algo(const detail::CollArgs& a, unsigned w, unsigned W, CallSite site) const;
  /// One call of the device API above: the calling group runs it alone (worker 0 of 1); nothing
  /// to do for zero elements. Ops: the operator of a reducing kind, detail::CopyOp for the others.
  template <class Coop, class Ops, class T, class Algo>
  GNIO_HD Status group_call(CallSite site, CollKind kind, Algo algo, const T* send, T* recv,
                            std::size_t count, int root = 0) const;
};

}  // namespace gnio

#include "gnio/device/impl/coll_impl.hpp"
