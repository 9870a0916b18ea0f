// Waiting on a 32-bit word: the one blocking primitive of the host backend's kernel threads (pool
// mailboxes, block and warp barriers) and of the network proxy's idle thread (its doorbell).
//
// Policy: a few pause instructions, then up to kFutexYields sched_yield() calls, then FUTEX_WAIT.
// The yields matter most. On the 2 oversubscribed CI cores a thread that arrives early at a
// barrier yields to the very threads it waits for, so the barrier usually completes before anyone
// has to sleep, and the sleep + wake syscalls and context switches are skipped. With free cores a
// yield returns at once and acts as a short spin. Measured on 2 pinned cores, 1000 launches of
// 8 x 64 threads with one sync_block each: futex sleep without yields 2.4-3.2 ms per launch; 4 to
// 64 yields first 1.0-1.4 ms (libstdc++'s std::atomic::wait, 4 yields, 1.1-1.5 ms); with 8
// processes sharing the 2 cores 64 yields did best, 16 and 32 close. An explicit policy rather
// than std::atomic::wait because standard libraries implement wait very differently.
//
// ThreadSanitizer does not see futex syscalls, and does not need to: a wait re-reads the word
// with acquire and returns only once it has changed, so happens-before comes from the atomic
// release that changed it.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gnio {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "futex waits need std::atomic<uint32_t> to be a plain 32-bit word");

/// Pause-spins before yielding: catch a change that is nanoseconds away without a syscall.
inline constexpr int kFutexSpins = 8;
/// Yields before sleeping (see the measurements above).
inline constexpr int kFutexYields = 32;

/// One CPU-friendly spin iteration.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// The word as the futex syscall takes it. Process-private futexes: only threads of this process
/// wait on these words.
inline std::uint32_t* futex_word(std::atomic<std::uint32_t>& a) noexcept {
  return reinterpret_cast<std::uint32_t*>(&a);
}

/// Sleeps while `*word` holds `old`, for at most `timeout` (nullptr: no limit); returns at once
/// (EAGAIN) if it no longer does, and may return early (a wake, a signal): callers re-check.
inline void futex_sleep(std::uint32_t* word, std::uint32_t old, const timespec* timeout) noexcept {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, old, timeout, nullptr, 0);
}

/// Wakes up to `n` threads sleeping on `word`. Call after changing it.
inline void futex_wake(std::uint32_t* word, int n) noexcept {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

/// The spin and yield phase of a wait: true when `a` changed from `old` (acquire) meanwhile.
inline bool futex_spin_while(std::atomic<std::uint32_t>& a, std::uint32_t old) noexcept {
  for (int i = 0; i < kFutexSpins; ++i) {
    if (a.load(std::memory_order_acquire) != old) return true;
    cpu_relax();
  }
  for (int i = 0; i < kFutexYields; ++i) {
    if (a.load(std::memory_order_acquire) != old) return true;
    sched_yield();
  }
  return false;
}

/// Blocks until `a` no longer holds `old` (acquire). Spurious wakeups are absorbed here.
inline void futex_wait_while(std::atomic<std::uint32_t>& a, std::uint32_t old) noexcept {
  if (futex_spin_while(a, old)) return;
  while (a.load(std::memory_order_acquire) == old) {
    // Returns at once (EAGAIN) if the word changed since the load: no lost wakeups.
    futex_sleep(futex_word(a), old, nullptr);
  }
}

/// As futex_wait_while, but gives up after `timeout`: false when `a` still holds `old`.
inline bool futex_wait_while_for(std::atomic<std::uint32_t>& a, std::uint32_t old,
                                 std::chrono::nanoseconds timeout) noexcept {
  if (futex_spin_while(a, old)) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (a.load(std::memory_order_acquire) == old) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<std::time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    futex_sleep(futex_word(a), old, &ts);
  }
  return true;
}

/// Wakes every thread sleeping in futex_wait_while(a, ...). Call after changing `a`.
inline void futex_wake_all(std::atomic<std::uint32_t>& a) noexcept {
  futex_wake(futex_word(a), INT_MAX);
}

/// Wakes one thread sleeping in futex_wait_while(a, ...). Call after changing `a`.
inline void futex_wake_one(std::atomic<std::uint32_t>& a) noexcept {
  futex_wake(futex_word(a), 1);
}

}  // namespace gnio
