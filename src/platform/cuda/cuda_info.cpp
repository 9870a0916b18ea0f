#include <cuda.h>
#include <cuda_runtime_api.h>

#include "platform/backend.hpp"
#include "platform/cuda/cuda_driver.hpp"
#include "platform/gpu_info.hpp"

namespace gnio::platform {
namespace {

// Queries here are diagnostics: a failure leaves a field at its default and must not leave an
// error behind for the next kernel-launch check.
bool ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

bool driver_attribute(const cuda_impl::DriverApi& api, CUdevice_attribute attribute, int ordinal) {
  CUdevice dev = 0;
  int value = 0;
  if (!api.complete || api.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return false;
  return api.cuDeviceGetAttribute(&value, attribute, dev) == CUDA_SUCCESS && value != 0;
}

int p2p_attribute(cudaDeviceP2PAttr attribute, int from, int to) {
  int value = -1;
  return ok(cudaDeviceGetP2PAttribute(&value, attribute, from, to)) ? value : -1;
}

}  // namespace

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> out;
  const int count = cuda_device_count();
  const cuda_impl::DriverApi& api = cuda_impl::driver_api();
  for (int d = 0; d < count; ++d) {
    CudaDeviceInfo info;
    info.ordinal = d;
    cudaDeviceProp prop{};
    if (ok(cudaGetDeviceProperties(&prop, d))) {
      info.name = prop.name;
      info.cc_major = prop.major;
      info.cc_minor = prop.minor;
      info.sm_count = prop.multiProcessorCount;
      info.total_memory = prop.totalGlobalMem;
      info.unified_addressing = prop.unifiedAddressing != 0;
      info.can_map_host_memory = prop.canMapHostMemory != 0;
    }
    char bus_id[32] = {};
    if (ok(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), d))) info.pci_bus_id = bus_id;
    info.vmm = driver_attribute(api, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
    info.vmm_posix_fd =
        driver_attribute(api, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d);
    info.vmm_gpudirect_rdma =
        driver_attribute(api, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, d);
    for (int p = 0; p < count; ++p) {
      if (p == d) continue;
      CudaPeerInfo peer;
      peer.peer = p;
      int can = 0;
      peer.can_access = ok(cudaDeviceCanAccessPeer(&can, d, p)) && can != 0;
      peer.performance_rank = p2p_attribute(cudaDevP2PAttrPerformanceRank, d, p);
      peer.native_atomics = p2p_attribute(cudaDevP2PAttrNativeAtomicSupported, d, p) > 0;
      peer.cuda_array_access = p2p_attribute(cudaDevP2PAttrCudaArrayAccessSupported, d, p) > 0;
      info.peers.push_back(peer);
    }
    out.push_back(std::move(info));
  }
  return out;
}

GpuIdentity cuda_device_identity(int ordinal) noexcept {
  GpuIdentity id;
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, ordinal))) return id;
  for (std::size_t i = 0; i < id.uuid.size(); ++i)
    id.uuid[i] = static_cast<unsigned char>(prop.uuid.bytes[i]);
  id.sm_count = prop.multiProcessorCount;
  id.compute_capability = prop.major * 10 + prop.minor;
  return id;
}

CudaVersions cuda_versions() noexcept {
  CudaVersions v;
  if (!ok(cudaDriverGetVersion(&v.driver))) v.driver = 0;
  if (!ok(cudaRuntimeGetVersion(&v.runtime))) v.runtime = 0;
  return v;
}

}  // namespace gnio::platform
