// The RMA measurements of gnio-perf (perf/gnio-perf/rma_gnio_kernels.inl) with NVSHMEM's device
// API. Each kernel mirrors its gnio counterpart line by line; where the two APIs differ in shape,
// the NVSHMEM side uses NVSHMEM's own idiom (as its perftests do):
//  * waits: gnio's wait_signal<Coop> is a group call; with NVSHMEM one thread of the group waits
//    (nvshmem_signal_wait_until) and the group then synchronises;
//  * put/get/put_signal at warp and block scope are the nvshmemx_*_warp / *_block functions.
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <string>

#include "gnio/error.hpp"
#include "nvshmem_kernels.hpp"

namespace gnio::perf::nvshmem_bench {
namespace {

/// The cooperation group of a scope: index among the launch's groups, barrier, leader.
template <Scope S>
struct Group;

template <>
struct Group<Scope::Thread> {
  __device__ static std::uint64_t index() {
    return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ static void sync() {}
  __device__ static bool leader() { return true; }
  __device__ static void put(void* d, const void* s, std::size_t n, int pe) {
    nvshmem_putmem(d, s, n, pe);
  }
  __device__ static void get(void* d, const void* s, std::size_t n, int pe) {
    nvshmem_getmem(d, s, n, pe);
  }
  __device__ static void put_signal(void* d, const void* s, std::size_t n, std::uint64_t* sig,
                                    std::uint64_t v, int pe) {
    nvshmem_putmem_signal(d, s, n, sig, v, NVSHMEM_SIGNAL_SET, pe);
  }
};

template <>
struct Group<Scope::Warp> {
  __device__ static std::uint64_t index() {
    return static_cast<std::uint64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  }
  __device__ static void sync() { __syncwarp(); }
  __device__ static bool leader() { return threadIdx.x % 32 == 0; }
  __device__ static void put(void* d, const void* s, std::size_t n, int pe) {
    nvshmemx_putmem_warp(d, s, n, pe);
  }
  __device__ static void get(void* d, const void* s, std::size_t n, int pe) {
    nvshmemx_getmem_warp(d, s, n, pe);
  }
  __device__ static void put_signal(void* d, const void* s, std::size_t n, std::uint64_t* sig,
                                    std::uint64_t v, int pe) {
    nvshmemx_putmem_signal_warp(d, s, n, sig, v, NVSHMEM_SIGNAL_SET, pe);
  }
};

template <>
struct Group<Scope::Block> {
  __device__ static std::uint64_t index() { return blockIdx.x; }
  __device__ static void sync() { __syncthreads(); }
  __device__ static bool leader() { return threadIdx.x == 0; }
  __device__ static void put(void* d, const void* s, std::size_t n, int pe) {
    nvshmemx_putmem_block(d, s, n, pe);
  }
  __device__ static void get(void* d, const void* s, std::size_t n, int pe) {
    nvshmemx_getmem_block(d, s, n, pe);
  }
  __device__ static void put_signal(void* d, const void* s, std::size_t n, std::uint64_t* sig,
                                    std::uint64_t v, int pe) {
    nvshmemx_putmem_signal_block(d, s, n, sig, v, NVSHMEM_SIGNAL_SET, pe);
  }
};

/// The group waits until its signal word reaches `v`.
template <Scope S>
__device__ void group_wait(std::uint64_t* sig, std::uint64_t v) {
  if (Group<S>::leader()) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
  Group<S>::sync();
}

struct Args {
  std::uint8_t* sym;
  std::uint8_t* priv;
  std::uint64_t* signal;  // latency: ping-pong word; bandwidth: per-group words
  std::uint64_t* start;   // bandwidth: per-block handshake words
  Split split;
  std::uint64_t bytes;
  std::uint64_t stride;
  std::uint64_t base;
  std::uint32_t iters;
  std::uint32_t slots;
  int peer;
  bool responder;
  bool bidir;
};

template <Scope S, RmaOp kOp>
__global__ void latency_kernel(Args a) {
  using G = Group<S>;
  if constexpr (kOp == RmaOp::Put) {
    for (std::uint32_t i = 0; i < a.iters; ++i) {
      G::put(a.sym, a.priv, a.bytes, a.peer);
      nvshmem_quiet();
      G::sync();
    }
  } else if constexpr (kOp == RmaOp::Get) {
    std::uint32_t slot = 0;
    for (std::uint32_t i = 0; i < a.iters; ++i) {
      G::get(a.priv, a.sym + slot * a.stride, a.bytes, a.peer);
      if (++slot == a.slots) slot = 0;
    }
  } else {
    for (std::uint32_t i = 1; i <= a.iters; ++i) {
      const std::uint64_t v = a.base + i;
      if (!a.responder) G::put_signal(a.sym, a.priv, a.bytes, a.signal, v, a.peer);
      group_wait<S>(a.signal, v);
      if (a.responder) G::put_signal(a.sym, a.priv, a.bytes, a.signal, v, a.peer);
    }
  }
}

template <Scope S, RmaOp kOp>
__global__ void bandwidth_kernel(Args a) {
  using G = Group<S>;
  if (a.bidir) {
    if (threadIdx.x == 0) {
      nvshmemx_signal_op(a.start + blockIdx.x, a.base + 1, NVSHMEM_SIGNAL_SET, a.peer);
      nvshmem_signal_wait_until(a.start + blockIdx.x, NVSHMEM_CMP_GE, a.base + 1);
    }
    __syncthreads();
  }
  const std::uint64_t gi = G::index();
  if (gi >= a.split.groups) return;  // uniform over the group
  const std::uint64_t off = a.split.offset(gi);
  const std::uint64_t len = a.split.length(gi, a.bytes);
  std::uint32_t slot = 0;
  for (std::uint32_t i = 0; i < a.iters; ++i) {
    if constexpr (kOp == RmaOp::Put) {
      G::put(a.sym + off, a.priv + off, len, a.peer);
    } else if constexpr (kOp == RmaOp::Get) {
      G::get(a.priv + off, a.sym + slot * a.stride + off, len, a.peer);
      if (++slot == a.slots) slot = 0;
    } else {
      G::put_signal(a.sym + off, a.priv + off, len, a.signal + gi, a.base + i + 1, a.peer);
    }
  }
  nvshmem_quiet();
}

/// As gnio-perf's AtomicKernel (rma_gnio_util.cpp).
__global__ void atomic_kernel(std::uint64_t* word, std::uint64_t* errors, std::uint64_t start,
                              std::uint32_t iters, int peer, bool compare_swap, bool verify_final) {
  std::uint64_t bad = 0;
  std::uint64_t expect = start;
  if (!compare_swap) {
    std::uint64_t inc = 1;
    for (std::uint32_t i = 0; i < iters; ++i) {
      const std::uint64_t old = nvshmem_uint64_atomic_fetch_add(word, inc, peer);
      bad += old != expect;
      expect = old + inc;
      inc = 1 + (old >> 63);  // always 1; makes the next add wait for this result
    }
  } else {
    for (std::uint32_t i = 0; i < iters; ++i) {
      const std::uint64_t old = nvshmem_uint64_atomic_compare_swap(word, expect, expect + 1, peer);
      if (old == expect) {
        ++expect;
      } else {
        ++bad;
        expect = old;
      }
    }
  }
  if (verify_final) bad += nvshmem_uint64_atomic_fetch(word, peer) != expect;
  if (bad)
    atomicAdd(reinterpret_cast<unsigned long long*>(errors), static_cast<unsigned long long>(bad));
}

__global__ void fill_kernel(std::uint8_t* buf, std::uint64_t bytes, std::uint64_t seed,
                            bool poison) {
  fill_share(buf, bytes, seed, poison,
             static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
             static_cast<std::uint64_t>(gridDim.x) * blockDim.x);
}

__global__ void check_kernel(const std::uint8_t* buf, std::uint64_t bytes, std::uint64_t guard,
                             std::uint64_t seed, std::uint64_t* result) {
  const std::uint64_t wrong = count_wrong_share(
      buf, bytes, guard, seed, static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
      static_cast<std::uint64_t>(gridDim.x) * blockDim.x);
  if (wrong)
    atomicAdd(reinterpret_cast<unsigned long long*>(result),
              static_cast<unsigned long long>(wrong));
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(ErrorClass::SystemError, std::string("nvshmem-perf: launch of ") + what +
                                             " failed: " + cudaGetErrorName(err) + ": " +
                                             cudaGetErrorString(err));
}

using Kernel = void (*)(Args);

template <Scope S>
Kernel pick(RmaOp op, Mode mode) {
  // An explicit table: each (scope, op, mode) kernel is instantiated exactly once.
  static constexpr Kernel kLatency[] = {latency_kernel<S, RmaOp::Put>,
                                        latency_kernel<S, RmaOp::Get>,
                                        latency_kernel<S, RmaOp::PutSignal>};
  static constexpr Kernel kBandwidth[] = {bandwidth_kernel<S, RmaOp::Put>,
                                          bandwidth_kernel<S, RmaOp::Get>,
                                          bandwidth_kernel<S, RmaOp::PutSignal>};
  return (mode == Mode::Lat ? kLatency : kBandwidth)[static_cast<int>(op)];
}

dim3 util_grid(const KernelContext& c, std::uint64_t bytes) {
  const std::uint64_t blocks = (bytes / 8 + 1 + 255) / 256;
  return dim3(static_cast<unsigned>(std::clamp<std::uint64_t>(blocks, 1, c.util_blocks)));
}

}  // namespace

void launch_rma(const KernelContext& c, const RmaLaunch& l) {
  if (is_atomic(l.op)) {
    atomic_kernel<<<1, 1, 0, c.stream>>>(c.signals + c.layout.atomic, c.errors, l.atomic_start,
                                         l.iters, l.peer, l.op == RmaOp::CompareSwap, l.check);
    check_launch("atomic_kernel");
    return;
  }
  Args a{};
  a.sym = c.sym;
  a.priv = c.priv;
  a.signal = c.signals + (l.mode == Mode::Lat ? c.layout.ping_pong : c.layout.group);
  a.start = c.signals + c.layout.start;
  a.split = l.split;
  a.bytes = l.bytes;
  a.stride = l.window_stride;
  a.base = l.signal_base;
  a.iters = l.iters;
  a.slots = l.window_slots;
  a.peer = l.peer;
  a.responder = l.responder;
  a.bidir = l.mode == Mode::Bibw;
  Kernel k = l.scope == Scope::Thread ? pick<Scope::Thread>(l.op, l.mode)
             : l.scope == Scope::Warp ? pick<Scope::Warp>(l.op, l.mode)
                                      : pick<Scope::Block>(l.op, l.mode);
  k<<<l.blocks, l.threads, 0, c.stream>>>(a);
  check_launch(l.mode == Mode::Lat ? "latency_kernel" : "bandwidth_kernel");
}

void launch_fill(const KernelContext& c, std::uint8_t* buf, std::uint64_t bytes, std::uint64_t seed,
                 bool poison) {
  fill_kernel<<<util_grid(c, bytes), 256, 0, c.stream>>>(buf, bytes, seed, poison);
  check_launch("fill_kernel");
}

void launch_count_wrong(const KernelContext& c, const std::uint8_t* buf, std::uint64_t bytes,
                        std::uint64_t guard, std::uint64_t seed, std::uint64_t* result) {
  check_kernel<<<util_grid(c, bytes + guard), 256, 0, c.stream>>>(buf, bytes, guard, seed, result);
  check_launch("check_kernel");
}

}  // namespace gnio::perf::nvshmem_bench
