#include "coll/gpu_share.hpp"

#include <algorithm>
#include <array>
#include <map>

namespace gnio::detail {

GpuShare share_of(const std::vector<platform::GpuIdentity>& rank_gpus) {
  GpuShare share;
  if (rank_gpus.empty()) return share;
  constexpr std::array<unsigned char, 16> kUnknown{};
  std::map<std::array<unsigned char, 16>, unsigned> ranks_on;
  const platform::GpuIdentity& first = rank_gpus.front();
  share.same_gpus = true;
  for (const platform::GpuIdentity& id : rank_gpus) {
    if (id.uuid == kUnknown || id.sm_count <= 0) {
      share.same_gpus = false;
      continue;
    }
    share.ranks = std::max(share.ranks, ++ranks_on[id.uuid]);
    const unsigned sms = static_cast<unsigned>(id.sm_count);
    share.sm_count = share.sm_count ? std::min(share.sm_count, sms) : sms;
    if (id.compute_capability != first.compute_capability || id.sm_count != first.sm_count)
      share.same_gpus = false;
  }
  return share;
}

unsigned resident_grid_limit(const GpuShare& share, unsigned blocks_per_sm) {
  if (share.ranks <= 1 || share.sm_count == 0) return ~0u;
  const unsigned per_sm = share.same_gpus ? std::max(blocks_per_sm, 1u) : 1u;
  return std::max(1u, per_sm * share.sm_count / share.ranks);
}

}  // namespace gnio::detail
