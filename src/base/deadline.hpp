// A point in time after which a host-side wait gives up.
#pragma once

#include <chrono>

namespace gnio {

/// A deadline on the steady clock. A zero or negative duration means "never expires"
/// (used when GNIO_TIMEOUT=0; abort still ends such waits).
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(double seconds) {
    Deadline d;
    d.infinite_ = seconds <= 0;
    if (!d.infinite_)
      d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds));
    return d;
  }
  static Deadline never() { return after(0); }

  bool infinite() const { return infinite_; }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  /// Milliseconds left, clamped to [0, cap_ms]; cap_ms when infinite.
  int remaining_ms(int cap_ms = 1 << 30) const {
    if (infinite_) return cap_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }

 private:
  bool infinite_ = true;
  Clock::time_point at_{};
};

}  // namespace gnio
