// What this machine and this build of gnio offer, as gnio-info reports it: the GPUs and how they
// reach each other, the CUDA versions, and the optional paths (GNIO_NET=ucx, the PMIx
// rendezvous). Read-only queries: no CUDA context is created, nothing is allocated, nothing is
// printed; none needs a communicator.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gnio {

/// How one GPU reaches another (cudaDeviceCanAccessPeer / cudaDeviceGetP2PAttribute).
struct GpuPeerInfo {
  int peer = -1;                   ///< ordinal of the other GPU
  bool can_access = false;         ///< this GPU can map and load/store the peer's memory
  int performance_rank = -1;       ///< relative link performance; lower is faster (-1: unknown)
  bool native_atomics = false;     ///< atomics on the peer's memory are native over the link
  bool cuda_array_access = false;  ///< CUDA arrays on the peer are accessible over the link
};

/// One GPU as this process sees it (ordinals follow CUDA_VISIBLE_DEVICES).
struct GpuInfo {
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
  std::vector<GpuPeerInfo> peers;   ///< every other visible GPU, in ordinal order
};

/// The CUDA versions in use: cudaDriverGetVersion / cudaRuntimeGetVersion (e.g. 13000 = 13.0);
/// 0 when unknown (no driver, or a build without the cuda backend).
struct CudaVersions {
  int driver = 0;
  int runtime = 0;
};

/// Every visible GPU; empty without a driver, a GPU or the cuda backend. A property that cannot
/// be read keeps its default value. Never throws.
std::vector<GpuInfo> gpus();

/// The driver and runtime versions (zeros where unknown). Never throws.
CudaVersions cuda_versions() noexcept;

/// What GNIO_NET=ucx would use on this machine (UCX version, how GPU heaps are reached), or why
/// it cannot run. Throws Error when UCX cannot be asked.
std::string ucx_support();

/// Whether Bootstrap::from_env() can meet through a PMIx launcher (mpirun, srun --mpi=pmix)
/// here: "available ..." or why not (built without PMIx's headers, libpmix not loadable).
std::string pmix_support();

}  // namespace gnio
