// What gnio-info reports about the machine's GPUs: each device and how every pair can reach each
// other. Read-only queries: no context is created, nothing is allocated. Plain C++ (no CUDA
// headers), so the tool and the no-CUDA build can share this declaration; the no-CUDA build
// supplies a stub that returns no devices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gnio::platform {

/// How one GPU reaches another (cudaDeviceCanAccessPeer / cudaDeviceGetP2PAttribute).
struct CudaPeerInfo {
  int peer = -1;                   ///< ordinal of the other GPU
  bool can_access = false;         ///< this GPU can map and load/store the peer's memory
  int performance_rank = -1;       ///< relative link performance; lower is faster (-1: unknown)
  bool native_atomics = false;     ///< atomics on the peer's memory are native over the link
  bool cuda_array_access = false;  ///< CUDA arrays on the peer are accessible over the link
};

/// One GPU as this process sees it (ordinals follow CUDA_VISIBLE_DEVICES).
struct CudaDeviceInfo {
  int ordinal = -1;
  std::string name;  ///< "NVIDIA H200"
  int cc_major = 0;  ///< compute capability, e.g. 9.0 for Hopper
  int cc_minor = 0;
  int sm_count = 0;              ///< streaming multiprocessors
  std::size_t total_memory = 0;  ///< bytes of device memory
  std::string pci_bus_id;        ///< "0000:00:06.0"
  bool unified_addressing = false;
  bool can_map_host_memory = false;
  bool vmm = false;                 ///< CUDA virtual memory management (cuMemCreate/cuMemMap)
  bool vmm_posix_fd = false;        ///< VMM memory exportable as a POSIX fd (gnio's symmetric heap)
  bool vmm_gpudirect_rdma = false;  ///< VMM memory can be created GPUDirect-RDMA capable
  std::vector<CudaPeerInfo> peers;  ///< every other visible GPU, in ordinal order
};

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

/// The CUDA versions in use: cudaDriverGetVersion / cudaRuntimeGetVersion (e.g. 13000 = 13.0);
/// 0 when unknown (no driver).
struct CudaVersions {
  int driver = 0;
  int runtime = 0;
};

/// Every visible GPU; empty without a driver or a GPU (never throws for that, never prints).
/// A property that cannot be read keeps its default value.
std::vector<CudaDeviceInfo> cuda_devices();

/// The driver and runtime versions (zeros where unknown). Never throws.
CudaVersions cuda_versions() noexcept;

}  // namespace gnio::platform
