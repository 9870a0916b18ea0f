// Where the calling thread sits in its launch, and the synchronisation a kernel may use, for both
// backends. On the GPU these are CUDA's built-ins; on the host backend a "kernel" runs on CPU
// threads (see gnio/launch.hpp) and these read the thread's launch context. Launches are
// one-dimensional: grid = number of blocks, block = threads per block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/macros.hpp"

#if !GNIO_ON_DEVICE
#include <atomic>
#include <chrono>
#include <thread>
#endif

namespace gnio {

/// Threads in a warp: the unit of lock-step execution on the GPU (emulated on the host).
inline constexpr unsigned kWarpSize = 32;

namespace detail {

/// One block of a host-backend launch: the barrier and shared memory its threads use.
struct HostBlock;

/// The launch coordinates of a CPU thread running a host-backend kernel.
struct HostThreadContext {
  unsigned thread, block, block_dim, grid_dim;
  HostBlock* host_block;
};

/// Set by the host launcher for the duration of a kernel; nullptr on any other thread.
extern thread_local HostThreadContext* t_host_thread;

void host_block_sync(HostBlock* b);
void host_warp_sync(HostBlock* b, unsigned warp);
void* host_block_shared(HostBlock* b);
/// Exchanges one 64-bit word among the lanes of a warp: lane `src_lane`'s value to every lane.
std::uint64_t host_warp_broadcast(HostBlock* b, unsigned warp, unsigned lane, std::uint64_t v,
                                  unsigned src_lane);
/// A block barrier that also tells every thread whether `p` held on any thread.
bool host_block_any(HostBlock* b, unsigned thread, bool p);
/// A warp barrier that returns the mask of lanes whose `p` held.
std::uint32_t host_warp_ballot(HostBlock* b, unsigned warp, unsigned lane, bool p);

}  // namespace detail

namespace dev {

/// Index of this thread in its block.
GNIO_HD_INLINE unsigned thread() {
#if GNIO_ON_DEVICE
  return threadIdx.x;
#else
  return detail::t_host_thread->thread;
#endif
}
/// Index of this block in the grid.
GNIO_HD_INLINE unsigned block() {
#if GNIO_ON_DEVICE
  return blockIdx.x;
#else
  return detail::t_host_thread->block;
#endif
}
/// Threads per block.
GNIO_HD_INLINE unsigned block_size() {
#if GNIO_ON_DEVICE
  return blockDim.x;
#else
  return detail::t_host_thread->block_dim;
#endif
}
/// Blocks in the grid.
GNIO_HD_INLINE unsigned grid_size() {
#if GNIO_ON_DEVICE
  return gridDim.x;
#else
  return detail::t_host_thread->grid_dim;
#endif
}
/// Index of this thread in the whole grid.
GNIO_HD_INLINE std::size_t global_thread() {
  return static_cast<std::size_t>(block()) * block_size() + thread();
}
/// Threads in the whole grid.
GNIO_HD_INLINE std::size_t global_threads() {
  return static_cast<std::size_t>(grid_size()) * block_size();
}
/// Lane of this thread in its warp.
GNIO_HD_INLINE unsigned lane() { return thread() % kWarpSize; }
/// Index of this thread's warp in its block.
GNIO_HD_INLINE unsigned warp() { return thread() / kWarpSize; }
/// Warps per block (the last one may be partial).
GNIO_HD_INLINE unsigned warps_per_block() { return (block_size() + kWarpSize - 1) / kWarpSize; }

/// Barrier over the threads of this block (__syncthreads).
GNIO_HD_INLINE void sync_block() {
#if GNIO_ON_DEVICE
  __syncthreads();
#else
  detail::host_block_sync(detail::t_host_thread->host_block);
#endif
}
/// Barrier over the lanes of this warp (__syncwarp).
GNIO_HD_INLINE void sync_warp() {
#if GNIO_ON_DEVICE
  __syncwarp();
#else
  detail::host_warp_sync(detail::t_host_thread->host_block, warp());
#endif
}
/// Barrier over the threads of this block that also returns, on every thread, whether `p` was
/// true on any of them (__syncthreads_or).
GNIO_HD_INLINE bool sync_block_or(bool p) {
#if GNIO_ON_DEVICE
  return __syncthreads_or(p) != 0;
#else
  return detail::host_block_any(detail::t_host_thread->host_block, thread(), p);
#endif
}
/// Barrier over the lanes of `mask` (this warp's lanes whose bits are set; all of them must call)
/// that returns the mask of those lanes whose `p` was true (__syncwarp + __ballot_sync). On the
/// host backend every lane of the warp must call (as for sync_warp), whatever `mask` says.
GNIO_HD_INLINE std::uint32_t warp_ballot(std::uint32_t mask, bool p) {
#if GNIO_ON_DEVICE
  __syncwarp(mask);
  return __ballot_sync(mask, p) & mask;
#else
  return detail::host_warp_ballot(detail::t_host_thread->host_block, warp(), lane(), p) & mask;
#endif
}
/// Lane `src`'s value of `v`, returned to every lane of the warp (all lanes must call).
GNIO_HD_INLINE std::uint64_t warp_broadcast(std::uint64_t v, unsigned src) {
#if GNIO_ON_DEVICE
  return __shfl_sync(0xffffffffu, v, src);
#else
  return detail::host_warp_broadcast(detail::t_host_thread->host_block, warp(), lane(), v, src);
#endif
}

#if defined(__CUDACC__)
/// The block's dynamic shared memory (LaunchDims::shared_bytes long).
__device__ __forceinline__ void* device_shared_memory() {
  extern __shared__ __align__(16) unsigned char gnio_dynamic_smem[];
  return gnio_dynamic_smem;
}
#endif
/// The block's dynamic shared memory (LaunchDims::shared_bytes long, 16-byte aligned).
GNIO_HD_INLINE void* shared_memory() {
#if GNIO_ON_DEVICE
  return device_shared_memory();
#else
  return detail::host_block_shared(detail::t_host_thread->host_block);
#endif
}

/// Nanoseconds on a clock that all threads of this GPU (or host) share; for deadlines.
GNIO_HD_INLINE std::uint64_t now_ns() {
#if GNIO_ON_DEVICE
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
#endif
}

/// Called in every iteration of a polling loop: free on the GPU for the first spins, then a short
/// sleep; on the host a brief spin, then yield, then sleeps of growing length (capped at 50 us)
/// so that many ranks on few cores still make progress.
GNIO_HD_INLINE void poll_pause(std::uint32_t iteration) {
#if GNIO_ON_DEVICE
  if (iteration > 1024) __nanosleep(iteration > 65536 ? 1000 : 100);
#else
  if (iteration < 64) return;
  if (iteration < 256) {
    std::this_thread::yield();
    return;
  }
  unsigned us = (iteration - 256) / 64 + 1;
  std::this_thread::sleep_for(std::chrono::microseconds(us > 50 ? 50 : us));
#endif
}

}  // namespace dev
}  // namespace gnio
