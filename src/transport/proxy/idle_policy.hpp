// How the thread that takes descriptors from the command ring waits between the turns of its
// loop, one policy for every network backend (tcp/, ucx/): the backend says whether a turn did
// something and how it sleeps (Proxy::sleep_until_rung() with what it waits on besides the
// doorbell); the thresholds and the bookkeeping are here.
#pragma once

#include <chrono>
#include <thread>

namespace gnio::proxy {

/// The idle wait of the thread that takes descriptors. After a turn that did something it goes on
/// at once. After an idle turn it only yields while fewer than kYieldTurns turns in a row were idle
/// or within the spin window after the last work, so a descriptor the device posts next is picked
/// up at once; past both it sleeps until the doorbell rings, looking again after 20 us, after
/// 200 us once kLongPollTurns turns in a row were idle: a descriptor from a GPU cannot ring, and
/// waits up to this long (where device code rings, Proxy::sleep_until_rung sleeps longer).
class IdlePolicy {
 public:
  /// `spin`: the spin window (Proxy::spin()). The last work counts from now.
  explicit IdlePolicy(std::chrono::microseconds spin) : spin_(spin) {}

  /// After each turn (`busy`: it did something). An idle turn first calls `on_idle()` (what the
  /// backend winds down while idle), then yields or calls `sleep(poll)` as above, `poll` being the
  /// longest it may sleep (Proxy::sleep_until_rung's `poll`).
  template <class OnIdle, class Sleep>
  void after_turn(bool busy, OnIdle&& on_idle, Sleep&& sleep) {
    const auto now = std::chrono::steady_clock::now();
    if (busy) {
      idle_ = 0;
      last_work_ = now;
      return;
    }
    on_idle();
    if (++idle_ < kYieldTurns || now - last_work_ < spin_) {
      std::this_thread::yield();
    } else {
      sleep(std::chrono::microseconds(idle_ < kLongPollTurns ? 20 : 200));
    }
  }

 private:
  static constexpr unsigned kYieldTurns = 64;
  static constexpr unsigned kLongPollTurns = 1024;

  const std::chrono::microseconds spin_;
  unsigned idle_ = 0;  // idle turns in a row
  std::chrono::steady_clock::time_point last_work_ = std::chrono::steady_clock::now();
};

}  // namespace gnio::proxy
