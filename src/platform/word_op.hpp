// A WordOp applied by the calling thread, through gnio's atomic wrapper: how the host backend
// (whose "device memory" is process memory) carries out Backend::word_atomic, how the cuda
// backend's kernels do (cuda_stream_ops.cu), and how the proxy applies signals and remote atomics
// where it can address the heap itself.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gnio/device/atomic.hpp"
#include "gnio/device/macros.hpp"
#include "platform/backend.hpp"

namespace gnio::platform {

/// Applies `op` to the `width`-byte (4 or 8) word at `word` with memory order `order` (Load:
/// its acquire part only) and returns the old value, zero-extended.
GNIO_HD inline std::uint64_t apply_word_op(void* word, unsigned width, WordOp op,
                                           std::uint64_t operand, std::uint64_t expected,
                                           dev::Order order) {
  auto apply = [&](auto* w) -> std::uint64_t {
    using T = std::remove_pointer_t<decltype(w)>;
    const T v = static_cast<T>(operand);
    switch (op) {
      case WordOp::Load:  // a load has no release part: AcqRel -> Acquire, Release -> Relaxed
        return dev::atomic_load(w, order == dev::Order::AcqRel    ? dev::Order::Acquire
                                   : order == dev::Order::Release ? dev::Order::Relaxed
                                                                  : order);
      case WordOp::Store:
      case WordOp::Exchange: return dev::atomic_exchange(w, v, order);
      case WordOp::Add: return dev::atomic_fetch_add(w, v, order);
      case WordOp::CompareSwap:
        return dev::atomic_compare_swap(w, static_cast<T>(expected), v, order);
    }
    return 0;
  };
  if (width == 4) return apply(static_cast<std::uint32_t*>(word));
  return apply(static_cast<std::uint64_t*>(word));
}

}  // namespace gnio::platform
