// TcpBootstrap's collectives: allgather (Bruck's, or a ring for slots too large for its
// messages), binomial-tree broadcast and dissemination barrier, each run one at a time under a
// sequence number and turned into a job abort when it fails.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap_shared.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {

template <class F>
void TcpBootstrap::collective(CollKind kind, F&& body) {
  std::lock_guard<std::mutex> coll_lock(coll_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!poisoned_.empty()) throw_poisoned();
  }
  auto seq = static_cast<std::int32_t>(++coll_seq_ & 0x7fffffff);
  Deadline deadline = Deadline::after(timeout_s_);
  GNIO_TRACE(Bootstrap, "rank %d: %s #%d", rank_, coll_name(static_cast<std::uint16_t>(kind)), seq);
  try {
    body(seq, deadline);
  } catch (const Error& e) {
    if (e.error_class() != ErrorClass::InvalidArgument) abort_job(e);
    throw;
  }
}

void TcpBootstrap::allgather(void* buf, std::size_t bytes) {
  GNIO_REQUIRE(buf || bytes == 0, "bootstrap: allgather into a null buffer");
  require_fits(bytes, "allgather (per rank) of");
  if (size_ == 1) return;
  auto* base = static_cast<unsigned char*>(buf);
  const auto flags = static_cast<std::uint16_t>(CollKind::Allgather);
  // Bruck's allgather in ceil(log2 size) rounds whenever its largest message (at most half the
  // ranks' slots) fits in a frame; the ring's size-1 steps otherwise. Both move
  // size-1 slots per rank; the rounds decide the latency at scale (14 instead of 16 383 at 16 k
  // ranks). Every rank makes the same choice: it depends on the size and the slot bytes only.
  // Round d carries min(d, size - d) slots: the last round (d = top, the largest power of two
  // below size) carries size - top, the one before top / 2.
  int top = 1;
  while (top * 2 < size_) top *= 2;
  const std::size_t largest = static_cast<std::size_t>(std::max(top / 2, size_ - top)) * bytes;
  if (largest <= max_msg_) {
    collective(CollKind::Allgather, [&](std::int32_t seq, const Deadline& deadline) {
      // held[j] is rank (rank_ - j)'s slot. Round d passes the first min(d, size - d) held slots
      // to rank + d and appends those of rank - d, so the targets are the barrier's (rank + 2^k).
      std::vector<unsigned char> held(static_cast<std::size_t>(size_) * bytes);
      if (bytes) std::memcpy(held.data(), base + static_cast<std::size_t>(rank_) * bytes, bytes);
      for (int d = 1; d < size_; d *= 2) {
        const int count = std::min(d, size_ - d);
        const std::size_t part = static_cast<std::size_t>(count) * bytes;
        send_frame((rank_ + d) % size_, FrameType::Coll, flags, seq, held.data(), part, deadline,
                   format("allgather #%d round %d", seq, d));
        const int from = (rank_ - d + size_) % size_;
        Message m = take(from, FrameType::Coll, seq, flags, part, deadline,
                         format("allgather #%d data (%d slots from rank %d)", seq, count, from));
        if (part)
          std::memcpy(held.data() + static_cast<std::size_t>(d) * bytes, m.data.data(), part);
      }
      for (int j = 1; j < size_ && bytes; ++j)  // held[0] is this rank's slot, already in place
        std::memcpy(base + static_cast<std::size_t>((rank_ - j + size_) % size_) * bytes,
                    held.data() + static_cast<std::size_t>(j) * bytes, bytes);
    });
    return;
  }
  collective(CollKind::Allgather, [&](std::int32_t seq, const Deadline& deadline) {
    // Ring: in step s, pass on the slot received in step s-1 (own slot first).
    const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    for (int step = 0; step < size_ - 1; ++step) {
      int send_slot = (rank_ - step + size_) % size_;
      int recv_slot = (rank_ - step - 1 + 2 * size_) % size_;
      send_frame(next, FrameType::Coll, flags, seq, base + send_slot * bytes, bytes, deadline,
                 format("allgather #%d step %d", seq, step));
      Message m = take(prev, FrameType::Coll, seq, flags, bytes, deadline,
                       format("allgather #%d data (slot of rank %d)", seq, recv_slot));
      if (bytes) std::memcpy(base + recv_slot * bytes, m.data.data(), bytes);
    }
  });
}

void TcpBootstrap::broadcast(void* buf, std::size_t bytes, int root) {
  GNIO_REQUIRE(root >= 0 && root < size_,
               "bootstrap: broadcast from root %d, but the job has ranks 0..%d", root, size_ - 1);
  GNIO_REQUIRE(buf || bytes == 0, "bootstrap: broadcast of a null buffer");
  require_fits(bytes, "broadcast of");
  if (size_ == 1) return;
  collective(CollKind::Broadcast, [&](std::int32_t seq, const Deadline& deadline) {
    // Binomial tree rooted at `root`, in ranks relative to it.
    const auto flags = static_cast<std::uint16_t>(CollKind::Broadcast);
    const int me = (rank_ - root + size_) % size_;
    int mask = 1;
    while (mask < size_) {
      if (me & mask) {
        int from = (me - mask + root) % size_;
        Message m = take(from, FrameType::Coll, seq, flags, bytes, deadline,
                         format("broadcast #%d data (root %d)", seq, root));
        if (bytes) std::memcpy(buf, m.data.data(), bytes);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (me + mask < size_)
        send_frame((me + mask + root) % size_, FrameType::Coll, flags, seq, buf, bytes, deadline,
                   format("broadcast #%d data", seq));
  });
}

void TcpBootstrap::barrier() {
  if (size_ == 1) return;
  collective(CollKind::Barrier, [&](std::int32_t seq, const Deadline& deadline) {
    // Dissemination: after round k every rank has heard, directly or not, from 2^(k+1) ranks.
    const auto flags = static_cast<std::uint16_t>(CollKind::Barrier);
    for (int dist = 1, round = 0; dist < size_; dist <<= 1, ++round) {
      send_frame((rank_ + dist) % size_, FrameType::Coll, flags, seq, nullptr, 0, deadline,
                 format("barrier #%d round %d", seq, round));
      take((rank_ - dist + size_) % size_, FrameType::Coll, seq, flags, 0, deadline,
           format("barrier #%d round %d", seq, round));
    }
  });
}

}  // namespace gnio::bootstrap
