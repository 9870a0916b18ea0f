// The tickets a proxy took from the command ring (gnio/device/proxy_ring.hpp) and has not
// finished, oldest first, and the ring's two counters they move: `head` passes a ticket once its
// slot and its source are free (device code may reuse both), `done` once it was applied at its
// target (what quiet() waits for). Both move in ticket order, and done never passes head. Every
// network backend keeps its tickets in one: the backend says what each ticket still waits for
// (its `Entry`), the ledger moves the counters.
#pragma once

#include <cstdint>
#include <deque>

namespace gnio::proxy {

/// Open tickets done() .. next() - 1 with an `Entry` each (default-constructed when opened). An
/// entry stays at its address until it is retired (a network library's completion callback may
/// hold it). Used by the one thread that takes descriptors.
template <class Entry>
class TicketLedger {
 public:
  /// Opens ticket next() (the descriptor just taken) and returns its entry.
  Entry& open() {
    Entry& entry = entries_.emplace_back();
    ++next_;
    return entry;
  }
  /// The entry of open ticket `ticket` (done() <= ticket < next()).
  Entry& operator[](std::uint64_t ticket) { return entries_[ticket - done_]; }
  /// The oldest open ticket's entry (one must be open).
  Entry& oldest() { return entries_.front(); }
  bool empty() const { return entries_.empty(); }

  /// The ticket open() opens next.
  std::uint64_t next() const { return next_; }
  /// Every ticket below this has a free slot and source.
  std::uint64_t head() const { return head_; }
  /// Every ticket below this was applied at its target (and is retired).
  std::uint64_t done() const { return done_; }

  /// Moves head past the following tickets as long as `source_free(entry)` holds for each; true
  /// when it moved (the caller publishes head()).
  template <class SourceFree>
  bool pass_head(SourceFree&& source_free) {
    const std::uint64_t before = head_;
    while (head_ < next_ && source_free(entries_[head_ - done_])) ++head_;
    return head_ != before;
  }
  /// Retires the oldest tickets below head as long as `finished(entry)` holds for each; true when
  /// done moved (the caller publishes done()).
  template <class Finished>
  bool retire(Finished&& finished) {
    const std::uint64_t before = done_;
    while (done_ < head_ && finished(entries_.front())) {
      entries_.pop_front();
      ++done_;
    }
    return done_ != before;
  }

 private:
  std::deque<Entry> entries_;  // tickets done_ .. next_ - 1
  std::uint64_t next_ = 0, head_ = 0, done_ = 0;
};

}  // namespace gnio::proxy
