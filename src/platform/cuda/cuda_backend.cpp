// CudaBackend's construction (the GPU checks, the VMM probe), its teardown, and the entry points
// make_cuda_backend / cuda_device_count / cuda_backend_compiled. The other members are defined by
// concept: cuda_backend_memory.cpp (the symmetric heap's VMM chunks, legacy CUDA IPC, host-mapped
// and private device memory), cuda_backend_buffers.cpp (user buffers shared with node peers) and
// cuda_backend_streams.cpp (streams, copies, word atomics and deliveries).
#include "platform/cuda/cuda_backend.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/cuda/cuda_driver.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_memory_util.hpp"
#include "platform/cuda/cuda_scoped_device.hpp"
#include "platform/cuda/cuda_stream_ops.hpp"
#include "platform/gpu_info.hpp"

namespace gnio::platform {
namespace {

using cuda_impl::chunk_properties;
using cuda_impl::driver_api;
using cuda_impl::DriverApi;
using cuda_impl::error_text;
using cuda_impl::kFallbackGranularity;
using cuda_impl::ScopedDevice;

const char* visible_devices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? v : "(unset)";
}

/// Logs peer_atomics_warning() for `device` (once per backend): the links to other visible GPUs
/// it can map, read with the same queries as gnio-info.
void warn_about_peer_atomics(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  CudaDeviceInfo info;
  info.ordinal = device;
  for (int p = 0; p < count; ++p) {
    if (p == device) continue;
    CudaPeerInfo peer;
    peer.peer = p;
    int can = 0, native = 0;
    peer.can_access = cudaDeviceCanAccessPeer(&can, device, p) == cudaSuccess && can != 0;
    peer.native_atomics = cudaDeviceGetP2PAttribute(&native, cudaDevP2PAttrNativeAtomicSupported,
                                                    device, p) == cudaSuccess &&
                          native != 0;
    (void)cudaGetLastError();
    info.peers.push_back(peer);
  }
  const std::string warning = peer_atomics_warning(info);
  if (!warning.empty()) GNIO_WARN(Init, "%s", warning.c_str());
}

}  // namespace

// ---- construction ------------------------------------------------------------------------------

CudaBackend::CudaBackend(int device) : device_(device) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorClass::Unsupported,
         "no usable CUDA driver or GPU (cudaGetDeviceCount: %s); check `nvidia-smi` and "
         "CUDA_VISIBLE_DEVICES, or run with GNIO_BACKEND=host",
         error_text(err).c_str());
  }
  if (count == 0)
    fail(ErrorClass::Unsupported,
         "no GPU is visible (CUDA_VISIBLE_DEVICES=%s); run with GNIO_BACKEND=host or expose GPUs",
         visible_devices());
  GNIO_REQUIRE(device >= 0 && device < count,
               "GPU ordinal %d is out of range: this process sees %d GPU(s) "
               "(CUDA_VISIBLE_DEVICES=%s); set GNIO_DEVICE to 0..%d, or -1 for LOCAL_RANK modulo "
               "the GPU count",
               device, count, visible_devices(), count - 1);

  cudaDeviceProp prop{};
  GNIO_CUDA_CHECK(device, cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(%d)",
                  device);
  if (prop.major < 7)
    fail(ErrorClass::Unsupported,
         "GPU %d (%s) has compute capability %d.%d; gnio needs 7.0 (Volta) or newer for its "
         "memory model (release/acquire at system scope, __nanosleep)",
         device, prop.name, prop.major, prop.minor);
  if (!prop.unifiedAddressing || !prop.canMapHostMemory)
    fail(ErrorClass::Unsupported,
         "GPU %d (%s) lacks unified addressing or host-memory mapping, which gnio's flags and "
         "proxy queues rely on (is this a 64-bit process on a supported OS?)",
         device, prop.name);

  // Leaves the device current on purpose (see the class comment). cudaFree(nullptr) creates the
  // primary context now, so that a broken driver or an exclusive-process GPU taken by another
  // process is reported here rather than at the first allocation.
  GNIO_CUDA_CHECK(device, cudaSetDevice(device), "cudaSetDevice(%d)", device);
  GNIO_CUDA_CHECK(device, cudaFree(nullptr), "creating the CUDA context (cudaFree(nullptr))");
  load_stream_op_kernels(device);

  char bus_id[32] = "unknown";
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) != cudaSuccess) {
    (void)cudaGetLastError();
    std::strcpy(bus_id, "unknown");
  }
  description_ = format("%s, sm_%d%d, %d SMs, %.1f GiB, PCI %s", prop.name, prop.major, prop.minor,
                        prop.multiProcessorCount,
                        static_cast<double>(prop.totalGlobalMem) / double(1ull << 30), bus_id);

  warn_about_peer_atomics(device);

  // CUDA VMM with POSIX-fd handles: probed now so that the memory layer can choose between VMM
  // and legacy IPC (vmm_supported()) before it allocates anything.
  const DriverApi& api = driver_api();
  granularity_ = kFallbackGranularity;
  if (!api.complete) {
    vmm_unsupported_reason_ = "the CUDA driver API is not available: " + api.missing;
  } else {
    CUdevice cu = 0;
    GNIO_CU_CHECK(device, api.cuDeviceGet(&cu, device), "cuDeviceGet(%d)", device);
    cu_device_ = cu;
    int vmm = 0, posix_fd = 0, gdr = 0;
    GNIO_CU_CHECK(
        device,
        api.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu),
        "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
    GNIO_CU_CHECK(
        device,
        api.cuDeviceGetAttribute(
            &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cu),
        "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)");
    // Optional: without it the heap still works inside the node (see chunk_properties()).
    if (api.cuDeviceGetAttribute(&gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                                 cu) != CUDA_SUCCESS)
      gdr = 0;
    gdr_capable_vmm_ = gdr != 0;
    if (!vmm) {
      vmm_unsupported_reason_ =
          "this GPU or driver does not support CUDA virtual memory management";
    } else if (!posix_fd) {
      vmm_unsupported_reason_ =
          "the driver cannot export VMM memory as POSIX file descriptors on this GPU";
    } else {
      const CUmemAllocationProp chunk_prop = chunk_properties(cu_device_, gdr_capable_vmm_);
      std::size_t granule = 0;
      CUresult r = api.cuMemGetAllocationGranularity(&granule, &chunk_prop,
                                                     CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      if (r != CUDA_SUCCESS || granule == 0) {
        vmm_unsupported_reason_ =
            "cuMemGetAllocationGranularity for fd-exportable memory failed: " + error_text(r);
      } else {
        granularity_ = granule;
        vmm_supported_ = true;
      }
    }
  }
  // Last: nothing after it may throw, or the destructor (which destroys it) would not run.
  GNIO_CUDA_CHECK(device, cudaStreamCreateWithFlags(&internal_stream_, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags (backend's internal stream)");
  if (vmm_supported_)
    GNIO_INFO(Init, "GPU %d: %s; CUDA VMM with POSIX fds, granularity %zu KiB%s", device_,
              description_.c_str(), granularity_ >> 10,
              gdr_capable_vmm_ ? ", GPUDirect RDMA capable" : "");
  else
    GNIO_INFO(Init,
              "GPU %d: %s; CUDA VMM unavailable (%s): node peers can map memory only through "
              "legacy CUDA IPC",
              device_, description_.c_str(), vmm_unsupported_reason_.c_str());
}

CudaBackend::~CudaBackend() {
  std::lock_guard<std::mutex> lock(mutex_);
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaStreamDestroy(internal_stream_); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaStreamDestroy (backend's internal stream)");
  if (mappings_.empty() && own_chunks_.empty() && reservations_.empty() &&
      ipc_allocations_.empty() && ipc_opened_.empty() && user_imports_.empty())
    return;
  GNIO_INFO(Memory,
            "GPU %d: releasing what was left at backend destruction: %zu mapping(s), %zu chunk(s), "
            "%zu reservation(s), %zu IPC allocation(s), %zu opened IPC handle(s)",
            device_, mappings_.size(), own_chunks_.size(), reservations_.size(),
            ipc_allocations_.size(), ipc_opened_.size());
  const DriverApi& api = driver_api();
  for (const auto& [va, m] : mappings_) {
    if (CUresult r = api.cuMemUnmap(va, m.bytes); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemUnmap(0x%zx, %zu bytes)", size_t{va}, m.bytes);
    if (m.imported)
      if (CUresult r = api.cuMemRelease(m.handle); r != CUDA_SUCCESS)
        cuda_impl::warn_driver(r, device_, "cuMemRelease(imported chunk)");
  }
  for (const auto& [va, m] : user_imports_) {
    if (CUresult r = api.cuMemUnmap(va, m.mapped); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemUnmap(registered buffer 0x%zx)", size_t{va});
    if (CUresult r = api.cuMemAddressFree(va, m.reserved); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemAddressFree(registered buffer 0x%zx)", size_t{va});
    if (CUresult r = api.cuMemRelease(m.handle); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemRelease(registered buffer 0x%zx)", size_t{va});
  }
  for (const auto& [fd, handle] : own_chunks_) {
    if (CUresult r = api.cuMemRelease(handle); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemRelease(chunk fd %d)", fd);
    ::close(fd);
  }
  for (const auto& [va, bytes] : reservations_)
    if (CUresult r = api.cuMemAddressFree(va, bytes); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemAddressFree(0x%zx, %zu bytes)", size_t{va}, bytes);
  for (const auto& [p, opens] : ipc_opened_)
    for (int i = 0; i < opens; ++i)
      if (cudaError_t e = cudaIpcCloseMemHandle(reinterpret_cast<void*>(p)); e != cudaSuccess)
        cuda_impl::warn_runtime(e, device_, "cudaIpcCloseMemHandle(0x%zx)", size_t{p});
  for (const auto& [p, bytes] : ipc_allocations_)
    if (cudaError_t e = cudaFree(reinterpret_cast<void*>(p)); e != cudaSuccess)
      cuda_impl::warn_runtime(e, device_, "cudaFree(IPC allocation 0x%zx)", size_t{p});
}

// ---- entry points ------------------------------------------------------------------------------

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver, no GPU, or a driver older than this cudart: "no GPUs", quietly. The runtime's
    // last-error state is cleared so a later launch check does not report it.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_backend_compiled() noexcept {
  return true;
}

}  // namespace gnio::platform
