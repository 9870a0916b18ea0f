#include "platform/cuda/cuda_memory_util.hpp"

#include "base/fail.hpp"
#include "platform/cuda/cuda_error.hpp"

namespace gnio::platform::cuda_impl {

std::size_t round_up(std::size_t n, std::size_t granule) {
  return (n + granule - 1) / granule * granule;
}

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

void zero_device_memory(void* p, std::size_t bytes, int device, cudaStream_t stream) {
  GNIO_CUDA_CHECK(device, cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync(%p, 0, %zu bytes)",
                  p, bytes);
  GNIO_CUDA_CHECK(device, cudaStreamSynchronize(stream),
                  "cudaStreamSynchronize (zero-filling %zu bytes)", bytes);
}

CUmemAllocationProp chunk_properties(int cu_device, bool gdr_capable) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cu_device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = gdr_capable ? 1 : 0;
  return prop;
}

CUmemAccessDesc read_write_access(int cu_device) {
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cu_device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

bool is_refusal(CUresult r) {
  return r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_PERMITTED;
}

[[noreturn]] void fail_refused(int device, const char* call, CUresult r) {
  fail(ErrorClass::Unsupported,
       "%s on GPU %d: the driver refuses CUDA VMM memory shared as POSIX file descriptors: %s. "
       "Node peers cannot map a growable heap here (typical of some containers and virtualised "
       "GPUs); use legacy CUDA IPC with GNIO_MEM_MAP=ipc (GNIO_MEM_MAP=auto falls back by itself)",
       call, device, error_text(r).c_str());
}

}  // namespace gnio::platform::cuda_impl
