// Running a host-backend kernel: every thread of the grid on its own CPU thread, all at once.
//
// Why all at once: gnio kernels wait on each other across blocks (grid-wide flags) and across
// processes (peer signals), exactly as persistent GPU kernels do, so running blocks one after
// another would deadlock. Threads come from a process-wide pool of reusable workers because
// creating ~500 std::threads per launch costs milliseconds and tests launch thousands of kernels.
#pragma once

#include <atomic>
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
  /// Votes (dev::sync_block_or, dev::warp_ballot): three slots for the block and three per warp,
  /// vote k using slot k % 3. After vote k's barrier every thread has read vote k - 1's slot and
  /// none can write vote k + 2's before the clearing thread (thread 0 / lane 0) passed vote k + 1's
  /// barrier, so that thread clears slot (k + 2) % 3 right after reading vote k.
  std::atomic<std::uint32_t> block_votes[3] = {};
  std::unique_ptr<std::atomic<std::uint32_t>[]> warp_votes;
  /// Per thread: how many block (warp) votes it has taken part in; touched only by its thread.
  std::unique_ptr<std::uint32_t[]> block_vote_rounds, warp_vote_rounds;
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
