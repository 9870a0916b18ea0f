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

/// Applies the signals of `count` deliveries (`items[i]`: word, op, operand; a null word is none)
/// in their order, once the data of all of them is in place (the caller's barrier ordered every
/// thread's stores before this thread's). Whoever sees a signal's new value sees the data.
/// On GPUs one system-scope fence before the first signal does that for all of them (a fence and
/// then a write form a release): every release costs a MEMBAR.SYS, and with one per change of
/// word, signals of eight blocks to eight words through the tcp proxy moved 0.26-0.35 M/s on one
/// H100. On the host each signal is a release of its own: ThreadSanitizer does not see fences.
template <class Item>
GNIO_HD void apply_signals_after_data(const Item* items, std::uint32_t count) {
#if GNIO_ON_DEVICE
  bool fenced = false;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!items[i].word) continue;
    if (!fenced) dev::fence_system();
    fenced = true;
    (void)apply_word_op(items[i].word, 8, static_cast<WordOp>(items[i].op), items[i].operand, 0,
                        dev::Order::Relaxed);
  }
#else
  for (std::uint32_t i = 0; i < count; ++i)
    if (items[i].word)
      (void)apply_word_op(items[i].word, 8, static_cast<WordOp>(items[i].op), items[i].operand, 0,
                          dev::Order::AcqRel);
#endif
}

/// What the agent's threads share: a batch's entries and small data, read out of host memory by
/// every thread at once. Each read of host memory crosses the bus (~1 us); read one field at a time
/// by one thread, the entries of a batch took several such trips each, and the agent moved 8-byte
/// puts at a quarter of the rate of a kernel launch per batch (bench/results/
/// 2026-12-06-h100-delivery-agent). On GPUs it lies in device memory (Backend::alloc_device), not
/// in block-shared memory: the agent is started while application kernels may hold every SM, and
/// an SM takes a block only if its shared memory fits the split between L1 and shared memory
/// that the kernels already there chose: beside a kernel using none, no block needing 2 KiB or
/// more starts (perf/probes/coresidency_probe.cu, bench/results/2026-12-07g-gpu). With this struct
/// (8 KiB) as `__shared__` the agent never started beside rma_persistent_test's kernel on one H100,
/// while the launches, which use no shared memory, did.
struct AgentScratch {
  std::uint64_t end;  ///< the batch's end (thread 0 -> all)
  std::uint64_t quit;
  AgentEntry entries[kAgentBatch];
  alignas(16) unsigned char data[kAgentBatch][kAgentThreadBytes];
};

/// The agent's loop, run by `threads` threads of one block (this is `thread`); `sync()` is the
/// block's barrier and `scratch` block-shared memory. Returns when the host sets `stop` and every
/// published entry is applied (or, while it waits for stream work that never completes, at once:
/// the host stops it only at teardown then).
///
/// Per batch (every published entry, up to kAgentBatch): the entries and the data of the small
/// ones are read at once; then, run by run (a run ends before an entry flagged kAgentStartsBatch,
/// whose data may overlap data or a signal word of the entries before it), the data lands and
/// the run's signals are applied in order; then the batch's last mark.
template <class Sync>
GNIO_HD void run_delivery_agent(DeliveryRing* ring, unsigned thread, unsigned threads, Sync sync,
                                AgentScratch* scratch) {
  constexpr std::uint64_t kReturn = ~std::uint64_t{0};
  const unsigned warp = thread / kWarpSize, lane = thread % kWarpSize;
  const unsigned warps = (threads + kWarpSize - 1) / kWarpSize;
  const unsigned lanes = threads < kWarpSize ? threads : kWarpSize;
  // Four threads read an entry's 64 bytes (16 each) where there are enough threads.
  const unsigned per_entry = threads >= 4 ? 4 : 1;
  AgentEntry* const entries = scratch->entries;
  std::uint64_t next = dev::atomic_load(&ring->head, dev::Order::Relaxed);  // only this writes it
  std::uint32_t idle = 0;
  for (;;) {
    if (thread == 0) {
      const std::uint64_t tail = dev::atomic_load(&ring->tail, dev::Order::Acquire);
      std::uint64_t end = tail - next > kAgentBatch ? next + kAgentBatch : tail;
      // The host stops the agent only once every entry it published was applied, so an empty
      // ring is the only place to look for it; looked at every eighth poll, since each read of
      // host memory is a trip across the bus that delays the next look at `tail`.
      if (end == next && idle % 8 == 7 && dev::atomic_load(&ring->stop, dev::Order::Acquire) != 0)
        end = kReturn;
      scratch->end = end;
    }
    sync();
    const std::uint64_t end = scratch->end;
    if (end == kReturn) return;
    if (end == next) {
      sync();  // every thread has read scratch->end before thread 0 writes the next
      dev::poll_pause(idle++);
      continue;
    }
    idle = 0;
    const auto count = static_cast<std::uint32_t>(end - next);
    for (std::uint32_t k = thread / per_entry; k < count; k += threads / per_entry)
      copy_delivery_bytes(&entries[k], &ring->entries[(next + k) % kAgentSlots], sizeof(AgentEntry),
                          thread % per_entry, per_entry);
    sync();
    if (thread == 0) {
      // Stream work (copy-engine data) the batch follows: `after` grows along the ring, so the
      // last entry's is the most any entry of the batch waits for.
      const std::uint64_t after = entries[count - 1].after;
      scratch->quit = 0;
      for (std::uint32_t it = 0;
           after && dev::atomic_load(&ring->stream_done, dev::Order::Acquire) < after; ++it) {
        if (dev::atomic_load(&ring->stop, dev::Order::Acquire) != 0) {
          scratch->quit = 1;
          break;
        }
        dev::poll_pause(it);
      }
    }
    // Small data, one thread each, read while thread 0 may still wait for the stream (reads only:
    // the bounce buffer stays the proxy's until the mark).
    for (std::uint32_t k = thread; k < count; k += threads)
      if (entries[k].bytes > 0 && entries[k].bytes <= kAgentThreadBytes)
        copy_delivery_bytes(scratch->data[k], entries[k].src, entries[k].bytes, 0, 1);
    sync();
    if (scratch->quit) return;
    for (std::uint32_t begin = 0; begin < count;) {
      std::uint32_t stop = begin + 1;
      while (stop < count && (entries[stop].flags & kAgentStartsBatch) == 0) ++stop;
      for (std::uint32_t k = begin; k < stop; ++k) {
        const AgentEntry& e = entries[k];
        if (e.bytes == 0) continue;
        if (e.bytes <= kAgentThreadBytes) {
          if (k % threads == thread) copy_delivery_bytes(e.dst, scratch->data[k], e.bytes, 0, 1);
        } else if (k % warps == warp) {
          copy_delivery_bytes(e.dst, e.src, e.bytes, lane, lanes);
        }
      }
      // Every thread's stores happen before thread 0's signals (the barrier orders them).
      sync();
      if (thread == 0) apply_signals_after_data(entries + begin, stop - begin);
      begin = stop;
      // The next run's data may fall on a word signalled here: it lands after.
      if (begin < count) sync();
    }
    if (thread == 0) {
      dev::atomic_store(&ring->done, entries[count - 1].mark, dev::Order::Release);
      // The entries were read: their slots may be refilled.
      dev::atomic_store(&ring->head, end, dev::Order::Release);
    }
    next = end;
  }
}

}  // namespace gnio::platform
