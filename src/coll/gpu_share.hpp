// How a job's ranks share GPUs, which bounds the grid of a host collective's kernel: its workers
// spin on their peers' workers, so on a GPU several ranks share (MPS, or ranks oversubscribing a
// GPU) every sharing rank's whole grid must be resident at once, or the spinning workers starve
// the ones they wait for.
#pragma once

#include <vector>

#include "platform/gpu_info.hpp"

namespace gnio::detail {

/// The job's GPU sharing; the same on every rank.
struct GpuShare {
  unsigned ranks = 1;      ///< most ranks of the job on one GPU (1: no GPU is shared)
  unsigned sm_count = 0;   ///< fewest SMs among the job's GPUs (0: no rank has a GPU)
  bool same_gpus = false;  ///< every rank has a GPU, all of one compute capability and SM count
};

/// The sharing that the identities of every rank's GPU (platform::cuda_device_identity; all zeros
/// for a rank without one) describe.
GpuShare share_of(const std::vector<platform::GpuIdentity>& rank_gpus);

/// Blocks per rank that keep every sharing rank's grid resident at once, for a kernel of which one
/// SM of this rank's GPU holds `blocks_per_sm`; on GPUs of different kinds (where that count could
/// differ between ranks, and so would the grid) one per SM, the least any launchable kernel gets.
/// At least 1. No limit (~0u) when no GPU is shared.
unsigned resident_grid_limit(const GpuShare& share, unsigned blocks_per_sm);

}  // namespace gnio::detail
