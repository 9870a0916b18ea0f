// gnio-perf rma's kernels, written against gnio's device API, and the functions that launch them
// (gnio::launch: a CUDA kernel on the cuda backend, CPU threads on the host backend).
//
// The kernels are split over several translation units so that nvcc builds them in parallel and
// no unit instantiates every (operation x scope) pair: rma_gnio_{thread,warp,block}.cpp each
// instantiate the latency and bandwidth kernels of one scope (from rma_gnio_kernels.inl), and
// rma_gnio_util.cpp holds the atomics and the fill/check kernels. They are compiled by nvcc when
// the cuda backend is built, else by the C++ compiler (host backend only).
#pragma once

#include <cstdint>

#include "gnio/device.hpp"
#include "gnio/launch.hpp"
#include "harness/rma_model.hpp"
#include "harness/rma_suite.hpp"

namespace gnio::perf {

/// What every gnio-perf rma kernel needs: the communicator, the buffers, the stream.
struct GnioKernelContext {
  DeviceComm dc;
  SymPtr<std::uint8_t> sym;       ///< this rank's symmetric buffer (same offset on the peer)
  std::uint8_t* priv = nullptr;   ///< this rank's private device buffer
  SymPtr<std::uint64_t> signals;  ///< SignalLayout words
  SignalLayout layout;
  std::uint64_t* errors = nullptr;  ///< device word: mismatches the atomics kernels counted
  StreamRef stream;
  LaunchDims util;  ///< launch shape of the fill and check kernels
};

/// Queues the latency or bandwidth kernel of `l` (l.scope selects the function).
void launch_rma_thread(const GnioKernelContext& ctx, const RmaLaunch& l);
void launch_rma_warp(const GnioKernelContext& ctx, const RmaLaunch& l);
void launch_rma_block(const GnioKernelContext& ctx, const RmaLaunch& l);
/// Queues the fetch_add or compare_swap latency kernel of `l`.
void launch_rma_atomic(const GnioKernelContext& ctx, const RmaLaunch& l);
/// Queues a kernel writing the pattern of `seed` (or the poison) into [0, bytes) of `buf`.
void launch_fill(const GnioKernelContext& ctx, std::uint8_t* buf, std::uint64_t bytes,
                 std::uint64_t seed, bool poison);
/// Queues a kernel adding the wrong bytes of `buf` (see count_wrong_share) to `*result`.
void launch_count_wrong(const GnioKernelContext& ctx, const std::uint8_t* buf, std::uint64_t bytes,
                        std::uint64_t guard, std::uint64_t seed, std::uint64_t* result);

}  // namespace gnio::perf
