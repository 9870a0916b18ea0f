// Semaphores: a ring of items, each with a status and a fixed-size info record, through which a
// kernel hands work to the CPU (or to another kernel) and gets it back, as DOCA GPUNetIO's
// semaphores do. The memory is page-locked host memory both sides reach (gnio::Semaphore,
// <gnio/semaphore.hpp>); this header is the view both use, passed to kernels by value.
//
//   producer: wait(i, Free) -> write info(i) -> set(i, Ready)
//   consumer: wait(i, Ready) -> read info(i) -> set(i, Free)   (or Done / Hold / Error)
//
// set() releases and get()/wait() acquire, so whoever sees Ready sees the info written before
// it. Every wait is bounded by its timeout and returns early on Exit.
#pragma once

#include <cstdint>

#include "gnio/device/atomic.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/thread.hpp"

namespace gnio {

/// An item's status. Free: the producer may fill it; Ready: filled, the consumer may take it;
/// Done: taken and processed (the producer decides when it is Free again); Hold: set aside by the
/// consumer; Error: the consumer could not process it; Exit: the other side asks this one to end.
enum class ItemStatus : std::uint32_t {
  Free = 0,
  Ready = 1,
  Done = 2,
  Hold = 3,
  Error = 4,
  Exit = 5
};

struct SemaphoreView {
  std::uint32_t* status = nullptr;  ///< [items], one per 64-byte line
  std::uint8_t* info = nullptr;     ///< [items][info_bytes]
  std::uint32_t items = 0;
  std::uint32_t info_bytes = 0;

  /// The item's status word (each on its own 64-byte line: no false sharing over the bus).
  GNIO_HD_INLINE std::uint32_t* word(std::uint32_t i) const { return status + 16 * (i % items); }
  GNIO_HD_INLINE ItemStatus get(std::uint32_t i) const {
    return static_cast<ItemStatus>(dev::atomic_load(word(i), dev::Order::Acquire));
  }
  /// Publishes `s` for item `i`, after everything this thread wrote before (its info included).
  GNIO_HD_INLINE void set(std::uint32_t i, ItemStatus s) const {
    dev::atomic_store(word(i), static_cast<std::uint32_t>(s), dev::Order::Release);
  }
  /// Item `i`'s info record.
  template <class T = std::uint8_t>
  GNIO_HD_INLINE T* info_of(std::uint32_t i) const {
    return reinterpret_cast<T*>(info + static_cast<std::size_t>(i % items) * info_bytes);
  }
  /// Waits up to `timeout_ns` until item `i` has status `want` (true) or Exit, or the time is up
  /// (false; also false on Exit unless Exit was asked for).
  GNIO_HD_INLINE bool wait(std::uint32_t i, ItemStatus want, std::uint64_t timeout_ns) const {
    const std::uint64_t start = dev::now_ns();
    for (std::uint32_t spin = 0;; ++spin) {
      const ItemStatus s = get(i);
      if (s == want) return true;
      if (s == ItemStatus::Exit || dev::now_ns() - start >= timeout_ns) return false;
      dev::poll_pause(spin);
    }
  }
};

}  // namespace gnio
