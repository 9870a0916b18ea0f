// The one atomic wrapper every cross-agent access in gnio goes through: cuda::atomic_ref under
// nvcc, at system scope unless the caller names a narrower one (so the GPU emits .sys-scoped
// loads/stores/fences that order NVLink and host-mapped traffic), std::atomic_ref under a plain
// C++ compiler (so ThreadSanitizer checks the protocol on the host backend). Memory orders are
// always explicit.
#pragma once

#include <atomic>
#include <cstdint>

#include "gnio/device/macros.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif

namespace gnio::dev {

/// Who an atomic access must be coherent with. System: every agent (other GPUs through peer
/// memory, the CPU, other processes) — the default, and the only safe choice for a word in the
/// symmetric heap or in host memory. Device: the threads of this GPU only — for words in device
/// memory that no other agent reads or writes (a ticket counter, a claim flag), where a
/// system-scope access would order traffic no one else observes. On the host backend every scope
/// is the same.
enum class Scope { System, Device };

#if defined(__CUDACC__)
template <Scope S>
inline constexpr auto kCudaScope =
    S == Scope::Device ? cuda::thread_scope_device : cuda::thread_scope_system;
template <class T, Scope S = Scope::System>
using atomic_ref_t = cuda::atomic_ref<T, kCudaScope<S>>;
#define GNIO_MO(o) cuda::std::memory_order_##o
#else
template <class T, Scope S = Scope::System>
using atomic_ref_t = std::atomic_ref<T>;
#define GNIO_MO(o) std::memory_order_##o
#endif

/// Memory orders, named as in C++; mapped onto the backend's atomic library.
enum class Order { Relaxed, Acquire, Release, AcqRel, SeqCst };

/// The order of a consumer's credit: a store that tells a producer it may overwrite memory the
/// consumer has read, made after a group barrier that every value read was used before (so the
/// reads are complete). On GPUs it goes without a release: a system-scope release would also wait
/// for the consumer's earlier stores into remote memory to be acknowledged, a round trip over the
/// link. CPU threads keep the release (free on x86; on weaker CPUs it orders the reads formally).
inline constexpr Order kCreditOrder = GNIO_ON_DEVICE ? Order::Relaxed : Order::Release;

/// The backend atomic library's memory order for `o`.
GNIO_HD_INLINE auto to_memory_order(Order o) {
  switch (o) {
    case Order::Relaxed: return GNIO_MO(relaxed);
    case Order::Acquire: return GNIO_MO(acquire);
    case Order::Release: return GNIO_MO(release);
    case Order::AcqRel: return GNIO_MO(acq_rel);
    default: return GNIO_MO(seq_cst);
  }
}

// Each operation takes the scope first (default System), so a call reads
// `atomic_load<Scope::Device>(p, o)` and the value type is deduced.
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE T atomic_load(T* p, Order o) {
  return atomic_ref_t<T, S>(*p).load(to_memory_order(o));
}
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE void atomic_store(T* p, T v, Order o) {
  atomic_ref_t<T, S>(*p).store(v, to_memory_order(o));
}
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE T atomic_fetch_add(T* p, T v, Order o) {
  return atomic_ref_t<T, S>(*p).fetch_add(v, to_memory_order(o));
}
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE T atomic_exchange(T* p, T v, Order o) {
  return atomic_ref_t<T, S>(*p).exchange(v, to_memory_order(o));
}
/// Raises `*p` to `v` if it is below; returns the value seen before.
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE T atomic_fetch_max(T* p, T v, Order o) {
#if defined(__CUDACC__)
  return atomic_ref_t<T, S>(*p).fetch_max(v, to_memory_order(o));
#else
  // std::atomic_ref has no fetch_max before C++26.
  atomic_ref_t<T, S> ref(*p);
  T seen = ref.load(std::memory_order_relaxed);
  while (seen < v &&
         !ref.compare_exchange_weak(seen, v, to_memory_order(o), std::memory_order_relaxed)) {
  }
  return seen;
#endif
}
/// Compare-and-swap; returns the value seen before (equal to `expected` when it succeeded).
template <Scope S = Scope::System, class T>
GNIO_HD_INLINE T atomic_compare_swap(T* p, T expected, T desired, Order o) {
  atomic_ref_t<T, S>(*p).compare_exchange_strong(
      expected, desired, to_memory_order(o),
      to_memory_order(o == Order::Release  ? Order::Relaxed
                      : o == Order::AcqRel ? Order::Acquire
                                           : o));
  return expected;
}

#if !GNIO_ON_DEVICE && defined(GNIO_TSAN)
/// ThreadSanitizer does not model standalone fences; a seq_cst read-modify-write on one shared
/// word gives it the same ordering to reason about.
inline std::atomic<unsigned> tsan_fence_word{0};
#endif

/// Orders this thread's earlier memory accesses before its later ones as seen by every agent
/// (other GPUs, the CPU, other processes).
GNIO_HD_INLINE void fence_system() {
#if GNIO_ON_DEVICE
  __threadfence_system();
#elif defined(GNIO_TSAN)
  tsan_fence_word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

#undef GNIO_MO

}  // namespace gnio::dev
