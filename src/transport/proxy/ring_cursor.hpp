// Where the thread that takes descriptors from the command ring (gnio/device/proxy_ring.hpp)
// stands in it: the ticket it takes next, whether that descriptor is published yet, and whether
// it already was when the thread's last turn ended. Every network backend drains the ring in
// ticket order through one.
#pragma once

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "gnio/device/proxy_ring.hpp"

namespace gnio::proxy {

/// The ring position of the thread that takes descriptors (one per proxy).
class RingCursor {
 public:
  /// Starts at ticket 0 of `ring` (Proxy::handle()).
  explicit RingCursor(const ProxyHandle& ring) : slots_(ring.slots), mask_(ring.capacity - 1) {}

  /// The ticket of the next descriptor to take.
  std::uint64_t next() const { return next_; }
  /// The next descriptor, once it is published in its slot (its fields may be read then); null
  /// before.
  const ProxyDesc* peek() const { return published() ? slots_ + (next_ & mask_) : nullptr; }
  /// Takes the next descriptor: the cursor moves past it.
  void advance() { ++next_; }
  /// At the end of each turn: notes whether the next descriptor is published already (the turn
  /// saw it and left it: it waits for something).
  void end_turn() { left_published_ = published(); }
  /// True when the next descriptor was published after the last turn ended. The sleep's look for
  /// new work: a descriptor the last turn saw and left needs no look.
  bool published_since_turn() const { return !left_published_ && published(); }

 private:
  bool published() const {
    return dev::atomic_load(&slots_[next_ & mask_].seq, dev::Order::Acquire) == next_ + 1;
  }

  const ProxyDesc* slots_;
  std::uint64_t mask_;
  std::uint64_t next_ = 0;
  bool left_published_ = false;
};

}  // namespace gnio::proxy
