// gnio-run's own deadline. Separate because the launcher's waits and the job's --timeout both
// use it, and the tool cannot use gnio's (src/base/deadline.hpp): tools include only gnio's
// public headers (scripts/check-layers.py).
#pragma once

#include <chrono>

namespace gnio::run {

/// A point in time after which one of gnio-run's waits gives up; a zero or negative span never
/// expires (--timeout 0). The tool keeps its own: it uses only gnio's public headers.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline after(double seconds) {
    Deadline d;
    d.infinite_ = seconds <= 0;
    if (!d.infinite_)
      d.at_ = Clock::now() +
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  /// Milliseconds left, clamped to [0, cap_ms]; cap_ms when it never expires.
  int remaining_ms(int cap_ms) const {
    if (infinite_) return cap_ms;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left < 0 ? 0 : left > cap_ms ? cap_ms : static_cast<int>(left);
  }

 private:
  bool infinite_ = true;
  Clock::time_point at_{};
};

}  // namespace gnio::run
