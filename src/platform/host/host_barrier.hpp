// The barrier behind dev::sync_block() and dev::sync_warp() on the host backend.
//
// Why not std::barrier: a GPU thread that returns early no longer takes part in __syncthreads,
// so a thread that leaves a host kernel must drop out of its barriers even while the others are
// already waiting (std::barrier::arrive_and_drop does that, but its completion step and the
// libstdc++ tree implementation are more than we need and harder to reason about under TSan).
// This one is a counter plus a generation word: the last arriver bumps the generation and wakes
// the waiters through a futex (base/futex.hpp). Waiters therefore sleep in the kernel instead of
// spinning, which is what keeps 8 ranks x ~100 kernel threads usable on a 2-core CI machine.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/futex.hpp"

namespace gnio::platform::host {

/// A reusable barrier for a fixed set of threads, some of which may drop out (exit) early.
///
/// Memory ordering: every arrival is an acq_rel read-modify-write of one state word, so the
/// thread that completes a phase acquires everything the others wrote before arriving; it then
/// publishes the next generation with a release increment that every waiter acquires. Writes made
/// before arrive_and_wait() therefore happen-before reads made after it returns in any
/// participant, and ThreadSanitizer sees exactly that edge.
class HostBarrier {
 public:
  HostBarrier() = default;
  HostBarrier(const HostBarrier&) = delete;
  HostBarrier& operator=(const HostBarrier&) = delete;

  /// Sets the number of participants. Call before any participant starts (the launcher
  /// publishes it to them with the same release that hands them their work).
  void init(std::uint32_t participants) noexcept {
    state_.store(pack(participants, 0), std::memory_order_relaxed);
    generation_.store(0, std::memory_order_relaxed);
  }

  /// Blocks until every remaining participant has arrived in this phase.
  void arrive_and_wait() noexcept {
    // Reading the generation before arriving is safe: it cannot move until this thread arrives.
    const std::uint32_t gen = generation_.load(std::memory_order_acquire);
    const std::uint64_t s = state_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (arrived(s) == expected(s)) {
      complete(s);
      return;
    }
    futex_wait_while(generation_, gen);
  }

  /// Leaves the barrier for good (the thread returned from the kernel). If everyone else is
  /// already waiting, this completes their phase.
  void arrive_and_drop() noexcept {
    const std::uint64_t s = state_.fetch_sub(std::uint64_t{1} << 32, std::memory_order_acq_rel) -
                            (std::uint64_t{1} << 32);
    if (arrived(s) != 0 && arrived(s) == expected(s)) complete(s);
  }

 private:
  static constexpr std::uint64_t pack(std::uint32_t expected, std::uint32_t arrived) {
    return (std::uint64_t{expected} << 32) | arrived;
  }
  static constexpr std::uint32_t expected(std::uint64_t s) {
    return static_cast<std::uint32_t>(s >> 32);
  }
  static constexpr std::uint32_t arrived(std::uint64_t s) { return static_cast<std::uint32_t>(s); }

  // Only the completing thread runs this: all others still in the barrier are waiting and none
  // can arrive or drop until the generation moves, so the plain reset of the count cannot race.
  void complete(std::uint64_t s) noexcept {
    state_.store(pack(expected(s), 0), std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake_all(generation_);
  }

  /// High 32 bits: participants still in the barrier; low 32 bits: arrived in this phase.
  std::atomic<std::uint64_t> state_{0};
  /// Phase number; waiters sleep on it (32 bits: the size futexes wait on natively).
  std::atomic<std::uint32_t> generation_{0};
};

}  // namespace gnio::platform::host
