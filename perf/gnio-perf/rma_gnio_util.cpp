// gnio-perf rma: the atomics latency kernel and the kernels that fill, poison and check buffers.
#include <algorithm>

#include "rma_gnio_kernels.hpp"

namespace gnio::perf {
namespace {

/// ITERS remote atomics from one thread, each waiting for the previous result, checking every
/// returned value against the sequence the word must go through.
struct AtomicKernel {
  DeviceComm dc;
  SymPtr<std::uint64_t> word;
  std::uint64_t* errors;
  std::uint64_t start;
  std::uint32_t iters;
  int peer;
  bool compare_swap;
  bool verify_final;

  GNIO_HD_INLINE void operator()() const {
    std::uint64_t bad = 0;
    std::uint64_t expect = start;
    if (!compare_swap) {
      std::uint64_t inc = 1;
      for (std::uint32_t i = 0; i < iters; ++i) {
        const std::uint64_t old = dc.atomic_fetch_add(word, inc, peer);
        bad += old != expect;
        expect = old + inc;
        // Always 1 (the word stays below 2^63), but the compiler cannot know: the next add waits
        // for this one's result, so each iteration is a full round trip, as compare_swap's are.
        inc = 1 + (old >> 63);
      }
    } else {
      for (std::uint32_t i = 0; i < iters; ++i) {
        const std::uint64_t old = dc.atomic_compare_swap(word, expect, expect + 1, peer);
        if (old == expect) {
          ++expect;
        } else {
          ++bad;
          expect = old;
        }
      }
    }
    if (verify_final) bad += dc.atomic_fetch(word, peer) != expect;
    if (bad) dev::atomic_fetch_add(errors, bad, dev::Order::Relaxed);
  }
};

struct FillKernel {
  std::uint8_t* buf;
  std::uint64_t bytes;
  std::uint64_t seed;
  bool poison;
  GNIO_HD_INLINE void operator()() const {
    fill_share(buf, bytes, seed, poison, dev::global_thread(), dev::global_threads());
  }
};

struct CheckKernel {
  const std::uint8_t* buf;
  std::uint64_t bytes;
  std::uint64_t guard;
  std::uint64_t seed;
  std::uint64_t* result;
  GNIO_HD_INLINE void operator()() const {
    const std::uint64_t wrong =
        count_wrong_share(buf, bytes, guard, seed, dev::global_thread(), dev::global_threads());
    if (wrong) dev::atomic_fetch_add(result, wrong, dev::Order::Relaxed);
  }
};

/// The fill/check shape for `bytes`: no more threads than 8-byte words.
LaunchDims util_dims(const GnioKernelContext& c, std::uint64_t bytes) {
  LaunchDims d = c.util;
  const std::uint64_t words = bytes / 8 + 1;
  const std::uint64_t blocks = (words + d.block - 1) / d.block;
  d.grid = static_cast<unsigned>(std::clamp<std::uint64_t>(blocks, 1, d.grid));
  return d;
}

}  // namespace

void launch_rma_atomic(const GnioKernelContext& c, const RmaLaunch& l) {
  const AtomicKernel k{.dc = c.dc,
                       .word = c.signals + static_cast<std::ptrdiff_t>(c.layout.atomic),
                       .errors = c.errors,
                       .start = l.atomic_start,
                       .iters = l.iters,
                       .peer = l.peer,
                       .compare_swap = l.op == RmaOp::CompareSwap,
                       .verify_final = l.check};
  launch(c.stream, {.grid = 1, .block = 1}, k);
}

void launch_fill(const GnioKernelContext& c, std::uint8_t* buf, std::uint64_t bytes,
                 std::uint64_t seed, bool poison) {
  launch(c.stream, util_dims(c, bytes),
         FillKernel{.buf = buf, .bytes = bytes, .seed = seed, .poison = poison});
}

void launch_count_wrong(const GnioKernelContext& c, const std::uint8_t* buf, std::uint64_t bytes,
                        std::uint64_t guard, std::uint64_t seed, std::uint64_t* result) {
  launch(c.stream, util_dims(c, bytes + guard),
         CheckKernel{.buf = buf, .bytes = bytes, .guard = guard, .seed = seed, .result = result});
}

}  // namespace gnio::perf
