// The latency and bandwidth kernels of gnio-perf rma for one cooperation scope. Included by
// rma_gnio_thread.cpp, rma_gnio_warp.cpp and rma_gnio_block.cpp, each defining
// GNIO_PERF_COOP (the group type) and GNIO_PERF_LAUNCH (the launcher's name). See rma_suite.hpp
// for what each kernel measures.
#include <cstddef>
#include <type_traits>

#include "gnio/error.hpp"
#include "rma_gnio_kernels.hpp"

namespace gnio::perf {
namespace {

using Coop = GNIO_PERF_COOP;

/// This thread's group among all groups of the launch (a block's warps are whole: threads per
/// block is a multiple of 32).
GNIO_HD_INLINE std::uint64_t group_index() {
  if constexpr (std::is_same_v<Coop, Thread>) {
    return dev::global_thread();
  } else if constexpr (std::is_same_v<Coop, Block>) {
    return dev::block();
  } else {
    return static_cast<std::uint64_t>(dev::block()) * dev::warps_per_block() + dev::warp();
  }
}

/// Latency: one group (the launch is one block of the group's width) issuing one operation after
/// another.
template <RmaOp kOp>
struct LatencyKernel {
  DeviceComm dc;
  SymPtr<std::uint8_t> sym;
  std::uint8_t* priv;
  SymPtr<std::uint64_t> signal;  // ping-pong signal word
  std::uint64_t bytes;
  std::uint64_t stride;  // get: window stride
  std::uint64_t base;    // first signal value - 1
  std::uint32_t iters;
  std::uint32_t slots;  // get: windows
  int peer;
  bool responder;

  GNIO_HD_INLINE void operator()() const {
    const Coop g{};
    if constexpr (kOp == RmaOp::Put) {
      for (std::uint32_t i = 0; i < iters; ++i) {
        dc.put<Coop>(sym, priv, bytes, peer);
        dc.quiet();
        g.sync();  // the group's put is complete when every member's share is
      }
    } else if constexpr (kOp == RmaOp::Get) {
      std::uint32_t slot = 0;
      for (std::uint32_t i = 0; i < iters; ++i) {
        dc.get<Coop>(priv, sym + static_cast<std::ptrdiff_t>(slot * stride), bytes, peer);
        if (++slot == slots) slot = 0;
      }
    } else {
      for (std::uint32_t i = 1; i <= iters; ++i) {
        const std::uint64_t v = base + i;
        if (!responder) dc.put_signal<Coop>(sym, priv, bytes, signal, v, SignalOp::Set, peer);
        if (dc.wait_signal<Coop>(signal, Cmp::Ge, v) != Status::Ok) return;
        if (responder) dc.put_signal<Coop>(sym, priv, bytes, signal, v, SignalOp::Set, peer);
      }
    }
  }
};

/// Bandwidth: every group moves its share of the message with one call per repetition; then
/// quiet. With `bidir`, block b first pairs up with block b of the peer so both directions run
/// at the same time.
template <RmaOp kOp>
struct BandwidthKernel {
  DeviceComm dc;
  SymPtr<std::uint8_t> sym;
  std::uint8_t* priv;
  SymPtr<std::uint64_t> start;   // per-block handshake words
  SymPtr<std::uint64_t> groups;  // per-group put_signal words
  Split split;
  std::uint64_t bytes;
  std::uint64_t stride;
  std::uint64_t base;
  std::uint32_t iters;
  std::uint32_t slots;
  int peer;
  bool bidir;

  GNIO_HD_INLINE void operator()() const {
    if (bidir) {
      if (dev::thread() == 0) {
        const SymPtr<std::uint64_t> mine = start + dev::block();
        dc.signal(mine, base + 1, SignalOp::Set, peer);
        (void)dc.wait_signal(mine, Cmp::Ge, base + 1);
      }
      dev::sync_block();
    }
    const std::uint64_t gi = group_index();
    if (gi >= split.groups) return;  // uniform over the group: whole groups leave
    const std::uint64_t off = split.offset(gi);
    const std::uint64_t len = split.length(gi, bytes);
    const auto at = static_cast<std::ptrdiff_t>(off);
    std::uint32_t slot = 0;
    for (std::uint32_t i = 0; i < iters; ++i) {
      if constexpr (kOp == RmaOp::Put) {
        dc.put<Coop>(sym + at, priv + off, len, peer);
      } else if constexpr (kOp == RmaOp::Get) {
        dc.get<Coop>(priv + off, sym + static_cast<std::ptrdiff_t>(slot * stride + off), len, peer);
        if (++slot == slots) slot = 0;
      } else {
        dc.put_signal<Coop>(sym + at, priv + off, len, groups + static_cast<std::ptrdiff_t>(gi),
                            base + i + 1, SignalOp::Set, peer);
      }
    }
    dc.quiet();
  }
};

template <RmaOp kOp>
void launch_latency(const GnioKernelContext& c, const RmaLaunch& l) {
  const LatencyKernel<kOp> k{.dc = c.dc,
                             .sym = c.sym,
                             .priv = c.priv,
                             .signal = c.signals + static_cast<std::ptrdiff_t>(c.layout.ping_pong),
                             .bytes = l.bytes,
                             .stride = l.window_stride,
                             .base = l.signal_base,
                             .iters = l.iters,
                             .slots = l.window_slots,
                             .peer = l.peer,
                             .responder = l.responder};
  launch(c.stream, {.grid = l.blocks, .block = l.threads}, k);
}

template <RmaOp kOp>
void launch_bandwidth(const GnioKernelContext& c, const RmaLaunch& l) {
  const BandwidthKernel<kOp> k{.dc = c.dc,
                               .sym = c.sym,
                               .priv = c.priv,
                               .start = c.signals + static_cast<std::ptrdiff_t>(c.layout.start),
                               .groups = c.signals + static_cast<std::ptrdiff_t>(c.layout.group),
                               .split = l.split,
                               .bytes = l.bytes,
                               .stride = l.window_stride,
                               .base = l.signal_base,
                               .iters = l.iters,
                               .slots = l.window_slots,
                               .peer = l.peer,
                               .bidir = l.mode == Mode::Bibw};
  launch(c.stream, {.grid = l.blocks, .block = l.threads}, k);
}

}  // namespace

void GNIO_PERF_LAUNCH(const GnioKernelContext& ctx, const RmaLaunch& l) {
  // An explicit table rather than nested templates: each (op, mode) pair is instantiated once.
  using Fn = void (*)(const GnioKernelContext&, const RmaLaunch&);
  static constexpr Fn kLatency[] = {launch_latency<RmaOp::Put>, launch_latency<RmaOp::Get>,
                                    launch_latency<RmaOp::PutSignal>};
  static constexpr Fn kBandwidth[] = {launch_bandwidth<RmaOp::Put>, launch_bandwidth<RmaOp::Get>,
                                      launch_bandwidth<RmaOp::PutSignal>};
  const int op = static_cast<int>(l.op);
  if (op > static_cast<int>(RmaOp::PutSignal))
    throw Error(ErrorClass::Internal, "gnio-perf: atomics have no group kernels");
  (l.mode == Mode::Lat ? kLatency : kBandwidth)[op](ctx, l);
}

}  // namespace gnio::perf
