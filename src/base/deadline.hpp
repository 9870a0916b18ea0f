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
    if (!d.infinite_) {
      d.span_ = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
      d.at_ = Clock::now() + d.span_;
    }
    return d;
  }
  /// A deadline that measures the absence of progress: a transfer that keeps moving bytes
  /// renews it after each step (renewed()), so only `seconds` without progress expire it. For
  /// the data plane between ranks; waits on strangers (the bootstrap's handshakes) keep fixed
  /// deadlines, so that a peer trickling bytes cannot hold them.
  static Deadline no_progress_for(double seconds) {
    Deadline d = after(seconds);
    d.renews_ = true;
    return d;
  }
  /// After progress: a no_progress_for deadline counts its span again from now; any other is
  /// returned unchanged.
  Deadline renewed() const {
    Deadline d = *this;
    if (renews_ && !infinite_) d.at_ = Clock::now() + span_;
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
  bool renews_ = false;
  Clock::duration span_{};
  Clock::time_point at_{};
};

}  // namespace gnio
