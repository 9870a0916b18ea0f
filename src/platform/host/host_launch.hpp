// Running a host-backend kernel: every thread of the grid on its own CPU thread, all at once.
//
// Why all at once: gnio kernels wait on each other across blocks (grid-wide flags) and across
// processes (peer signals), exactly as persistent GPU kernels do, so running blocks one after
// another would deadlock. Threads come from a process-wide pool of reusable workers because
// creating ~500 std::threads per launch costs milliseconds and tests launch thousands of kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gnio/device/thread.hpp"
#include "gnio/launch.hpp"
#include "platform/host/host_barrier.hpp"

namespace gnio::detail {

/// One block of a running host kernel: its barriers, warp-exchange slots and shared memory.
/// Lives (in an array, one per block) for the duration of one launch.
struct HostBlock {
  /// dev::sync_block(): all threads of the block.
  platform::host::HostBarrier block_barrier;
  /// dev::sync_warp() and dev::warp_broadcast(): one per warp of kWarpSize lanes (the last one
  /// has fewer when the block size is not a multiple of kWarpSize).
  std::unique_ptr<platform::host::HostBarrier[]> warp_barriers;
  /// Two broadcast slots per warp, used alternately by consecutive broadcasts: a lane may start
  /// broadcast k+1 while a slower lane still reads broadcast k, but cannot reach k+2 before every
  /// lane passed k+1's barrier (i.e. finished reading k).
  std::unique_ptr<std::uint64_t[]> broadcast_slots;
  /// Per thread: how many broadcasts it has done (selects the slot); touched only by its thread.
  std::unique_ptr<std::uint32_t[]> broadcast_rounds;
  /// This block's dynamic shared memory (LaunchDims::shared_bytes, 16-byte aligned, zeroed).
  void* shared = nullptr;
  /// Threads in this block (LaunchDims::block).
  unsigned threads = 0;

  /// Lanes in warp `w` (kWarpSize except for a partial last warp).
  unsigned lanes_in_warp(unsigned w) const noexcept {
    const unsigned first = w * kWarpSize;
    return threads - first < kWarpSize ? threads - first : kWarpSize;
  }
};

}  // namespace gnio::detail

namespace gnio::platform::host {

/// Runs `task` as a grid of task.dims.grid x task.dims.block CPU threads and returns when every
/// thread has returned. `stream` is the stream the task belongs to (for diagnostics and to catch
/// a kernel synchronising its own stream). Rethrows the first exception any thread threw.
/// The shape must have passed detail::check_launch_dims(dims, true).
void run_host_kernel(const detail::HostTask& task, detail::HostStream* stream);

/// Statistics of the process-wide kernel thread pool (for tests and gnio-info).
struct HostPoolStats {
  std::size_t threads = 0;  ///< worker threads alive
  std::size_t idle = 0;     ///< of which waiting for work
  std::size_t limit = 0;    ///< most threads the pool will create
};
/// A snapshot of the kernel thread pool.
HostPoolStats host_pool_stats();

}  // namespace gnio::platform::host
