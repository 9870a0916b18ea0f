// gnio-run's own deadline. Separate because the launcher's waits and the job's --timeout both
// use it, and the tool cannot use gnio's (src/base/deadline.hpp): tools include only gnio's
// public headers (scripts/check-layers.py).
#pragma once

#include <chrono>
#include <optional>

namespace gnio::run {

/// A point in time after which one of gnio-run's waits gives up; a zero or negative span never
/// expires (--timeout 0). The tool keeps its own: it uses only gnio's public headers. Unlike
/// gnio's, it needs no renewal, so it is just an optional time point.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  /// `seconds` from now; never for zero or less (as a default-constructed Deadline).
  static Deadline after(double seconds) {
    Deadline d;
    if (seconds > 0)
      d.at_ = Clock::now() +
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }
  bool expired() const { return at_ && Clock::now() >= *at_; }
  /// Milliseconds left, clamped to [0, cap_ms]; cap_ms when it never expires.
  int remaining_ms(int cap_ms) const {
    if (!at_) return cap_ms;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*at_ - Clock::now()).count();
    return left < 0 ? 0 : left > cap_ms ? cap_ms : static_cast<int>(left);
  }

 private:
  std::optional<Clock::time_point> at_;  ///< empty: never expires
};

}  // namespace gnio::run
