// DeviceComm: the communicator as kernels see it. A trivially copyable handle that
// Comm::device_handle() returns and kernels take by value. It turns symmetric pointers into
// addresses (local and peer), and every device-side operation (put/get/signal/atomics/waits/
// barriers) is a member of it; the definitions are in impl/device_comm_impl.hpp.
//
// Every wait is bounded: it watches the host-set abort word and a deadline (GNIO_TIMEOUT); on
// expiry the first failing thread records where it stalled (StallRecord) and every later wait of
// the communicator returns Status::Aborted at once, so kernels drain instead of hanging. The host
// turns the record into a gnio::Error (Comm::check, Comm::synchronize). When the host's liveness
// watcher sees a rank die, waits return Status::RemoteError and failed_rank() names the rank.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/device/impl/device_comm_state.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/sym_ptr.hpp"
#include "gnio/device/team.hpp"
#include "gnio/device/thread.hpp"
#include "gnio/device/word_ops.hpp"

namespace gnio {

/// The source location of a device-API call, captured by default arguments so a stall report can
/// name the line that waited.
struct CallSite {
  const char* file;
  unsigned line;
  GNIO_HD_INLINE CallSite(const char* f = __builtin_FILE(), unsigned l = __builtin_LINE())
      : file(f), line(l) {}
};

/// How a peer is reached.
enum class Route : std::uint8_t {
  None = 0,   ///< no transport reaches it: operations fail with Status::Unsupported
  P2P = 1,    ///< its heap is mapped into this rank's address space (same node)
  Proxy = 2,  ///< through the proxy transport (another node, GNIO_NET=tcp)
};

/// The device-side communicator handle: Comm::device_handle() fills it, kernels take it by value.
/// Its state (detail::DeviceCommState) and the transport machinery below are private; gnio's own
/// device code (collectives, channels) reaches them through detail::DeviceCommPort.
struct DeviceComm : private detail::DeviceCommState {
 public:
  // ======== identity ========
  GNIO_HD_INLINE int rank() const { return rank_; }
  GNIO_HD_INLINE int size() const { return size_; }
  /// Index of this rank among the ranks of its node.
  GNIO_HD_INLINE int local_rank() const { return local_rank_; }
  /// Number of ranks on this node.
  GNIO_HD_INLINE int local_size() const { return local_size_; }
  /// The team of all ranks.
  GNIO_HD_INLINE const Team& world() const { return world_; }
  /// The team of the ranks on this node (whose memory this rank can load and store).
  GNIO_HD_INLINE const Team& node() const { return node_; }

  // ======== addressing ========
  /// Node-local index of `peer`, or -1 when it is on another node.
  GNIO_HD_INLINE int local_index(int peer) const {
    if (node_contiguous_) {
      int li = peer - node_first_;
      return static_cast<unsigned>(li) < static_cast<unsigned>(local_size_) ? li : -1;
    }
    return local_index_[peer];
  }
  /// How `peer` is reached.
  GNIO_HD_INLINE Route route(int peer) const {
    return local_index(peer) >= 0 ? Route::P2P : proxy_.ring ? Route::Proxy : Route::None;
  }
  /// True when `peer`'s memory can be loaded and stored directly (same node).
  GNIO_HD_INLINE bool is_p2p(int peer) const { return local_index(peer) >= 0; }
  /// This rank's address of a symmetric object. (Both layouts: with the table layout the stride
  /// is 0 and heap_base_ is this rank's heap, so no table read is needed.)
  template <class T>
  GNIO_HD_INLINE T* local(SymPtr<T> p) const {
    return reinterpret_cast<T*>(heap_base_ +
                                static_cast<std::uint64_t>(local_rank_) * heap_stride_ + p.offset);
  }
  /// `peer`'s copy of a symmetric object as an address this rank can load and store, or nullptr
  /// when `peer` is not on this node.
  template <class T>
  GNIO_HD_INLINE T* peer_ptr(SymPtr<T> p, int peer) const {
    int li = local_index(peer);
    if (li < 0) return nullptr;
    // One branch, uniform across the kernel (every thread sees the same handle).
    char* base = heap_peer_base_ ? reinterpret_cast<char*>(heap_peer_base_[li])
                                 : heap_base_ + static_cast<std::uint64_t>(li) * heap_stride_;
    return reinterpret_cast<T*>(base + p.offset);
  }

  // ======== one-sided data movement ========
  // Group operations (Coop = Tile<N>, Warp, Block): the whole group calls with the same
  // arguments, and the group is synchronized at entry and exit, as NVSHMEM's _warp/_block calls:
  // every member's writes of the source before the call are copied, and on return the operation
  // is as far along for every member as the function says (so one member may signal for all).
  /// Copies `count` elements from `src` (any memory this rank can read) to `dst` on `peer`.
  /// Returns when `src` may be reused; the data is visible at the peer after quiet(), fence()
  /// followed by a signal, or a barrier. A peer on another node is reached through the proxy
  /// (GNIO_NET), which reads `src` itself: on GPUs a source of more than 256 bytes must be
  /// global memory (heap, cudaMalloc, host-pinned); smaller data is copied into the proxy ring
  /// by the calling thread (docs/guide/multi-node.md).
  template <class Coop = Thread, class T>
  GNIO_HD void put(SymPtr<T> dst, const T* src, std::size_t count, int peer,
                   CallSite site = {}) const;
  /// put() that may return before `src` can be reused; complete with quiet().
  template <class Coop = Thread, class T>
  GNIO_HD void put_nbi(SymPtr<T> dst, const T* src, std::size_t count, int peer,
                       CallSite site = {}) const;
  /// Copies `count` elements of `src` on `peer` into `dst` (this rank's memory). On return the
  /// data is in `dst` for every thread of the group.
  template <class Coop = Thread, class T>
  GNIO_HD void get(T* dst, SymPtr<T> src, std::size_t count, int peer, CallSite site = {}) const;
  /// get() whose data is guaranteed in `dst` only after quiet().
  template <class Coop = Thread, class T>
  GNIO_HD void get_nbi(T* dst, SymPtr<T> src, std::size_t count, int peer,
                       CallSite site = {}) const;
  /// put(), then updates `sig` on `peer` (Set or Add `value`) such that a peer that sees the new
  /// signal value also sees all the data.
  template <class Coop = Thread, class T>
  GNIO_HD void put_signal(SymPtr<T> dst, const T* src, std::size_t count, SymPtr<std::uint64_t> sig,
                          std::uint64_t value, SignalOp op, int peer, CallSite site = {}) const;

  // ======== signals and ordering ========
  /// Updates `sig` on `peer`, ordered after this thread's earlier puts to `peer`.
  GNIO_HD void signal(SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op, int peer,
                      CallSite site = {}) const;
  /// Reads this rank's signal word.
  GNIO_HD std::uint64_t signal_read(SymPtr<std::uint64_t> sig) const;
  /// Waits until this rank's `sig` compares true against `value`. Bounded (see file comment).
  /// A group's members agree whether it succeeded: Ok on every member or on none.
  template <class Coop = Thread>
  GNIO_HD Status wait_signal(SymPtr<std::uint64_t> sig, Cmp cmp, std::uint64_t value,
                             CallSite site = {}) const;
  /// True when this rank's `sig` compares true against `value` now (never waits).
  GNIO_HD bool test(SymPtr<std::uint64_t> sig, Cmp cmp, std::uint64_t value) const;
  /// Orders this thread's earlier puts/atomics to `peer` before its later ones to `peer`.
  GNIO_HD void fence(int peer) const;
  /// Completes every put/get/atomic this thread issued so far, to all peers.
  GNIO_HD void quiet() const;

  // ======== atomics on peers' memory; T is int32/uint32/int64/uint64 ========
  // Each is atomic on its word and orders nothing else (like OpenSHMEM's): use fence()/quiet() or
  // a signal to order other accesses around it.
  template <class T>
  GNIO_HD T atomic_fetch(SymPtr<T> p, int peer, CallSite site = {}) const;
  template <class T>
  GNIO_HD void atomic_set(SymPtr<T> p, T value, int peer, CallSite site = {}) const;
  template <class T>
  GNIO_HD void atomic_add(SymPtr<T> p, T value, int peer, CallSite site = {}) const;
  template <class T>
  GNIO_HD T atomic_fetch_add(SymPtr<T> p, T value, int peer, CallSite site = {}) const;
  /// Returns the old value; the swap happened when it equals `expected`.
  template <class T>
  GNIO_HD T atomic_compare_swap(SymPtr<T> p, T expected, T desired, int peer,
                                CallSite site = {}) const;
  template <class T>
  GNIO_HD T atomic_swap(SymPtr<T> p, T value, int peer, CallSite site = {}) const;

  // ======== team synchronisation ========
  /// Waits until every member of `team` has called sync() as often as this rank; orders memory
  /// accesses before it (on every member) before those after it. One group per rank at a time.
  template <class Coop = Thread>
  GNIO_HD Status sync(const Team& team, CallSite site = {}) const;
  /// quiet() then sync(): everything issued before it is complete and visible on return.
  template <class Coop = Thread>
  GNIO_HD Status barrier(const Team& team, CallSite site = {}) const;

  /// The status a member of a group returns after waits each member did on its own: Ok when all
  /// succeeded, else the member's own failure, or (for a member whose wait succeeded) the abort
  /// the failing member raised. So the members agree on Ok versus not Ok (which failure each
  /// names may differ): branch on `!= Status::Ok`, and members never meet the group's next
  /// barrier on different paths. A group barrier (Coop::any).
  template <class Coop>
  GNIO_HD Status group_status(Status own) const;

  // ======== failure state ========
  /// True when the host aborted the communicator or a device error was recorded.
  GNIO_HD_INLINE bool aborted() const {
    return control_ && control_stopped(*control_, dev::Order::Relaxed);
  }
  /// What a wait that saw the abort word returns: RemoteError when a rank was lost, else Aborted.
  GNIO_HD_INLINE Status abort_status() const {
    return dev::atomic_load(&control_->abort, dev::Order::Acquire) == kAbortPeerLost
               ? Status::RemoteError
               : Status::Aborted;
  }
  /// The rank whose loss aborted the communicator (Status::RemoteError), or -1.
  GNIO_HD_INLINE int failed_rank() const {
    if (!control_ || dev::atomic_load(&control_->abort, dev::Order::Acquire) != kAbortPeerLost)
      return -1;
    return static_cast<int>(dev::atomic_load(&control_->failed_rank, dev::Order::Relaxed));
  }

 private:
  friend struct detail::DeviceCommPort;

  /// Records a failure (first one wins) and makes every later wait return Status::Aborted.
  GNIO_HD void report(Status status, const char* op, int peer, std::uint64_t heap_offset,
                      std::uint64_t expected, std::uint64_t seen, Cmp cmp, std::uint64_t waited_ns,
                      CallSite site) const;
  /// Polls `ready(seen)` until it returns true, the communicator aborts, or the deadline passes.
  template <class Ready>
  GNIO_HD Status wait_until(Ready ready, const char* op, int peer, std::uint64_t heap_offset,
                            Cmp cmp, std::uint64_t expected, CallSite site) const;
  /// The hot path of every operation: true when `peer` is a valid node peer (p2p-mapped) and the
  /// byte range [offset, offset+bytes) lies inside the heap. Records nothing; operations that
  /// get false go to the proxy (proxy_target), which records why when it cannot carry them.
  GNIO_HD bool p2p_target(int peer, std::uint64_t offset, std::uint64_t bytes) const;
  /// The cold path of operations the proxy carries: true when `peer` is valid, on another node,
  /// the proxy is enabled and the range lies inside the heap; otherwise records why the target
  /// was refused (as check_target does) and returns false.
  GNIO_HD bool proxy_target(const char* op, int peer, std::uint64_t offset, std::uint64_t bytes,
                            CallSite site) const;
  /// True when the proxy can read or write `bytes` at `addr` (a put's source when `inline_ok`,
  /// a get's destination otherwise): always on the host backend; on GPUs global memory, or a put
  /// small enough to travel inline. Otherwise records InvalidArgument and returns false.
  GNIO_HD bool proxy_reaches(int peer, const void* addr, std::uint64_t bytes, bool inline_ok,
                             CallSite site) const;
  /// Posts `desc` (every field but seq) to the proxy ring: waits for a credit (bounded), fills
  /// the slot and publishes it; with `wait_consumed` also waits until the proxy has read the
  /// source (not needed for data of up to kProxyInlineBytes, copied into the slot). False when a
  /// wait failed (recorded).
  GNIO_HD bool proxy_post(const ProxyDesc& desc, bool wait_consumed, const char* op, CallSite site,
                          std::uint64_t* ticket = nullptr) const;
  /// Waits (bounded) until the proxy finished ticket `ticket` and every earlier one.
  GNIO_HD bool proxy_wait_done(std::uint64_t ticket, const char* op, int peer, std::uint64_t offset,
                               CallSite site) const;
  /// get/get_nbi from a peer that is not p2p-mapped: the group's leader posts one descriptor;
  /// get() then waits until the data is in `dst`.
  template <class Coop>
  GNIO_HD void proxy_get(void* dst, std::uint64_t src_offset, std::uint64_t bytes, int peer,
                         bool wait, const char* op, CallSite site) const;
  /// An atomic on a peer that is not p2p-mapped, carried by the proxy: the calling thread posts
  /// it and, when `fetch`, waits for the old value (returned; 0 after a failure).
  GNIO_HD std::uint64_t proxy_atomic(AtomicOp aop, std::uint64_t offset, std::uint64_t width,
                                     std::uint64_t value, std::uint64_t expected, int peer,
                                     bool fetch, const char* op, CallSite site) const;
  /// put/put_nbi/put_signal to a peer that is not p2p-mapped: the group's leader posts one
  /// descriptor (after the whole group reached the call, so the source is complete) unless its
  /// `post` is false (the group still meets at both barriers).
  template <class Coop>
  GNIO_HD void proxy_put(const ProxyDesc& desc, bool wait_consumed, const char* op, CallSite site,
                         bool post = true) const;
  /// quiet()'s wait for every operation posted to the proxy so far to be applied remotely.
  GNIO_HD void proxy_quiet() const;
  /// A counter of the proxy ring that device code waits on (host memory, advanced by the proxy).
  enum class ProxyCounter { Head, Done };
  /// wait_until() for `enough(value)` of the proxy ring's counter `which`, read with acquire
  /// order. On a GPU the threads read this GPU's copy of the counter, and a thread reads both
  /// counters themselves (and raises both copies) only when the copy is not enough and no other
  /// thread of the GPU is reading them (ProxyDeviceWords says why); on the host backend the
  /// counter itself.
  template <class Enough>
  GNIO_HD Status proxy_wait(ProxyCounter which, Enough enough, const char* op, int peer,
                            std::uint64_t heap_offset, Cmp cmp, std::uint64_t expected,
                            CallSite site) const;
  /// The peer-memory path of put/put_nbi/get/get_nbi: the group copies `bytes` between its
  /// barriers at entry and exit (see device_comm_impl.hpp).
  template <class Coop>
  GNIO_HD void group_p2p_copy(void* dst, const void* src, std::size_t bytes) const;
  /// put (`wait`: the source is reusable on return) and put_nbi.
  template <class Coop>
  GNIO_HD void put_bytes(std::uint64_t dst_offset, const void* src, std::size_t bytes, int peer,
                         bool wait, const char* op, CallSite site) const;
  /// get (`wait`: the data is there on return) and get_nbi.
  template <class Coop>
  GNIO_HD void get_bytes(void* dst, std::uint64_t src_offset, std::size_t bytes, int peer,
                         bool wait, const char* op, CallSite site) const;
  /// Classifies and records why a target was refused (InvalidArgument or Unsupported).
  GNIO_HD void reject_target(const char* op, int peer, std::uint64_t offset, std::uint64_t bytes,
                             CallSite site) const;
};

}  // namespace gnio

#include "gnio/device/impl/copy.hpp"
#include "gnio/device/impl/device_comm_impl.hpp"
#include "gnio/device/impl/device_comm_port.hpp"
