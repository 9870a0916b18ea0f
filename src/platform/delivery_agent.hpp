// The delivery agent: a resident piece of device code (Backend::start_delivery_agent) that applies
// the small puts and signals a proxy thread received, taken from a ring in host memory, so that no
// kernel is launched for them. Measured on one H200 (perf/probes/delivery_probe.cu): a launch per
// signal costs 9.5 us from post to completion and allows 0.19 M signals/s, and never runs beside a
// kernel that fills the GPU; the agent takes 4.7 us, 9 M/s, and keeps running beside one (it is
// resident before). The proxy thread still moves large data with the copy engine on a stream; an
// entry that must follow such stream work names the stream's mark it waits for (`after`).
//
// The loop is written once, here, for both backends: one CUDA block (kAgentThreads threads) on
// GPUs, one host stream's thread on the host backend (proxy staging forced on, for tests).
#pragma once

#include <cstdint>
#include <cstring>

#include "gnio/device/atomic.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/thread.hpp"
#include "platform/backend.hpp"
#include "platform/word_op.hpp"

namespace gnio::platform {

/// Entries in the ring: deliveries handed over and not yet taken by the agent.
inline constexpr std::uint32_t kAgentSlots = 1024;
/// Most entries the agent takes at once (their data lands in any order, then their signals in
/// ring order).
inline constexpr std::uint32_t kAgentBatch = 64;
/// The agent's threads on a GPU (one block): four warps copy four deliveries' data at once.
inline constexpr unsigned kAgentThreads = 128;
/// Data up to this size is copied by one thread (many tiny puts in parallel); more by a warp.
inline constexpr std::uint32_t kAgentThreadBytes = 64;

/// One delivery (see Delivery): data, then the signal, then `mark` into DeliveryRing::done.
struct alignas(64) AgentEntry {
  void* dst;
  const void* src;  ///< host memory the device reads
  std::uint64_t* word;
  std::uint64_t operand;
  std::uint64_t mark;
  /// Taken only once DeliveryRing::stream_done >= after (stream work queued before it: its data
  /// lands first). 0: nothing to wait for.
  std::uint64_t after;
  std::uint32_t bytes;
  std::uint16_t op;     ///< WordOp of the signal
  std::uint16_t flags;  ///< kAgentStartsBatch
};
static_assert(sizeof(AgentEntry) == 64, "an entry is one 64-byte line");

/// The entry's data may overlap data or a signal word of entries before it in its batch: the agent
/// applies everything before it first.
inline constexpr std::uint16_t kAgentStartsBatch = 1;

/// Shared by the proxy thread (host) and the agent (device); page-locked, mapped host memory.
struct DeliveryRing {
  alignas(64) std::uint64_t tail;  ///< host: entries published (release)
  std::uint64_t stop;              ///< host: 1 = return once every published entry is applied
  alignas(64) std::uint64_t head;  ///< agent: entries taken (their slots are free again)
  std::uint64_t done;              ///< agent: the mark of the last entry applied (release)
  /// The stream's deliveries store their marks here (Delivery::done), for entries' `after`.
  alignas(64) std::uint64_t stream_done;
  AgentEntry entries[kAgentSlots];
};

/// Copies `n` bytes with `threads` threads cooperating, this one being `thread` (on the host: one
/// thread, memcpy). On GPUs each thread keeps several loads in flight: reads of host memory cross
/// the bus, and having several outstanding is what makes them fast.
GNIO_HD inline void copy_delivery_bytes(void* dst, const void* src, std::size_t n, unsigned thread,
                                        unsigned threads) {
#if GNIO_ON_DEVICE
  auto copy = [&](auto unit) {
    using V = decltype(unit);
    constexpr unsigned kUnroll = 4;
    const std::size_t count = n / sizeof(V);
    auto* to = static_cast<V*>(dst);
    const auto* from = static_cast<const V*>(src);
    for (std::size_t base = thread; base < count; base += kUnroll * threads) {
      V v[kUnroll];
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) {
        const std::size_t i = base + u * threads;
        if (i < count) v[u] = from[i];
      }
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) {
        const std::size_t i = base + u * threads;
        if (i < count) to[i] = v[u];
      }
    }
  };
  const std::uintptr_t align =
      reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) | n;
  if (align % 16 == 0)
    copy(uint4{});
  else if (align % 8 == 0)
    copy(std::uint64_t{});
  else if (align % 4 == 0)
    copy(std::uint32_t{});
  else
    copy(static_cast<unsigned char>(0));
#else
  // The host backend's agent is one thread.
  (void)thread, (void)threads;
  std::memcpy(dst, src, n);
#endif
}

/// The agent's loop, run by `threads` threads of one block (this is `thread`); `sync()` is the
/// block's barrier and `shared` one word of block-shared memory. Returns when the host sets
/// `stop` and every published entry is applied (or, while it waits for stream work that never
/// completes, at once: the host stops it only at teardown then).
template <class Sync>
GNIO_HD void run_delivery_agent(DeliveryRing* ring, unsigned thread, unsigned threads, Sync sync,
                                std::uint64_t* shared) {
  constexpr std::uint64_t kReturn = ~std::uint64_t{0};
  const unsigned warp = thread / kWarpSize, lane = thread % kWarpSize;
  const unsigned warps = (threads + kWarpSize - 1) / kWarpSize;
  const unsigned lanes = threads < kWarpSize ? threads : kWarpSize;
  std::uint64_t next = dev::atomic_load(&ring->head, dev::Order::Relaxed);  // only this writes it
  std::uint32_t idle = 0;
  for (;;) {
    if (thread == 0) {
      // The batch: published entries from `next`, up to kAgentBatch, up to the next that starts
      // a batch of its own.
      const std::uint64_t tail = dev::atomic_load(&ring->tail, dev::Order::Acquire);
      std::uint64_t end = next;
      if (tail != next) {
        end = next + 1;
        while (end < tail && end - next < kAgentBatch &&
               (ring->entries[end % kAgentSlots].flags & kAgentStartsBatch) == 0)
          ++end;
        // Stream work the batch follows: `after` grows along the ring, so the last one's is the
        // most any entry of the batch waits for.
        const std::uint64_t after = ring->entries[(end - 1) % kAgentSlots].after;
        for (std::uint32_t it = 0;
             dev::atomic_load(&ring->stream_done, dev::Order::Acquire) < after; ++it) {
          if (dev::atomic_load(&ring->stop, dev::Order::Acquire) != 0) {
            end = kReturn;
            break;
          }
          dev::poll_pause(it);
        }
      } else if (dev::atomic_load(&ring->stop, dev::Order::Acquire) != 0) {
        end = kReturn;
      }
      *shared = end;
    }
    sync();
    const std::uint64_t end = *shared;
    sync();  // every thread has read it before thread 0 writes the next
    if (end == kReturn) return;
    if (end == next) {
      dev::poll_pause(idle++);
      continue;
    }
    idle = 0;
    // Data: small entries one thread each, larger ones a warp each, all at once.
    for (std::uint64_t i = next; i < end; ++i) {
      const AgentEntry& e = ring->entries[i % kAgentSlots];
      const auto k = static_cast<unsigned>(i - next);
      if (e.bytes == 0) continue;
      if (e.bytes <= kAgentThreadBytes) {
        if (k % threads == thread) copy_delivery_bytes(e.dst, e.src, e.bytes, 0, 1);
      } else if (k % warps == warp) {
        copy_delivery_bytes(e.dst, e.src, e.bytes, lane, lanes);
      }
    }
    // Every thread's stores happen before thread 0's releases (the barrier orders them), so
    // whoever sees a signal or the mark sees all of the data.
    sync();
    if (thread == 0) {
      // As deliver_batch's kernel (cuda_stream_ops.cu): a release only where the signal word
      // changes; later signals on the same word continue its release sequence.
      const std::uint64_t* last = nullptr;
      for (std::uint64_t i = next; i < end; ++i) {
        const AgentEntry& e = ring->entries[i % kAgentSlots];
        if (!e.word) continue;
        (void)apply_word_op(e.word, 8, static_cast<WordOp>(e.op), e.operand, 0,
                            e.word != last ? dev::Order::AcqRel : dev::Order::Relaxed);
        last = e.word;
      }
      dev::atomic_store(&ring->done, ring->entries[(end - 1) % kAgentSlots].mark,
                        dev::Order::Release);
      // The entries were read: their slots may be refilled.
      dev::atomic_store(&ring->head, end, dev::Order::Release);
    }
    next = end;
  }
}

}  // namespace gnio::platform
