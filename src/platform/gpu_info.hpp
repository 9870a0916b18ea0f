// The platform's GPU queries behind gnio::gpus() and gnio::cuda_versions() (gnio/system_info.hpp),
// implemented by the cuda backend (platform/cuda/cuda_info.cpp) or its stand-in (no_cuda):
// each device and how every pair can reach each other. Read-only: no context is created, nothing
// is allocated. Plain C++ (no CUDA headers), so the no-CUDA build supplies a stub that returns no
// devices.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "gnio/system_info.hpp"

namespace gnio::platform {

// The types are the public ones (gnio/system_info.hpp); these names are the backend's own.
using CudaPeerInfo = GpuPeerInfo;
using CudaDeviceInfo = GpuInfo;

/// The warning for GPU `d` when it maps a peer's memory over a link without native atomics
/// (cudaDevP2PAttrNativeAtomicSupported = 0, typical of PCIe without atomic routing): device-API
/// atomics and SignalOp::Add on that peer's ranks are then not atomic. Empty when there is none.
inline std::string peer_atomics_warning(const CudaDeviceInfo& d) {
  std::string peers;
  for (const CudaPeerInfo& p : d.peers)
    if (p.can_access && !p.native_atomics)
      peers += (peers.empty() ? "" : ", ") + std::to_string(p.peer);
  if (peers.empty()) return {};
  return "GPU " + std::to_string(d.ordinal) + " reaches GPU(s) " + peers +
         " without native atomics over the link (cudaDevP2PAttrNativeAtomicSupported = 0): "
         "device-API atomics (atomic_add, fetch_add, compare_swap, ...) and signals with "
         "SignalOp::Add to ranks on those GPUs are not atomic; use SignalOp::Set with distinct "
         "values there, or place those ranks on different nodes (the proxy applies them "
         "atomically)";
}

using gnio::CudaVersions;

/// Every visible GPU; empty without a driver or a GPU (never throws for that, never prints).
/// A property that cannot be read keeps its default value.
std::vector<CudaDeviceInfo> cuda_devices();

/// What ranks compare to learn whether they share a GPU, and the figures that bound how many blocks
/// stay resident on it: the UUID is the same in every process that sees the GPU (whatever its
/// CUDA_VISIBLE_DEVICES ordinal) and differs between GPUs and MIG instances on any machine.
struct GpuIdentity {
  std::array<unsigned char, 16> uuid{};  ///< all zeros: unknown (or no GPU)
  int sm_count = 0;
  int compute_capability = 0;  ///< major * 10 + minor
};

/// The identity of visible GPU `ordinal`; all zeros when it cannot be read. Never throws.
GpuIdentity cuda_device_identity(int ordinal) noexcept;

/// The driver and runtime versions (zeros where unknown). Never throws.
CudaVersions cuda_versions() noexcept;

}  // namespace gnio::platform
