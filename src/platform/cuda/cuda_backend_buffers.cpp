// CudaBackend's user buffers (Comm::register_buffer): what export_buffer() accepts and how it
// describes it (a legacy CUDA IPC handle of a cudaMalloc allocation, or the POSIX fd of a VMM
// allocation), and how import_buffer() maps a node peer's.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/cuda/cuda_backend.hpp"
#include "platform/cuda/cuda_driver.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_memory_util.hpp"
#include "platform/cuda/cuda_scoped_device.hpp"

namespace gnio::platform {
namespace {

using cuda_impl::address;
using cuda_impl::driver_api;
using cuda_impl::DriverApi;
using cuda_impl::error_text;
using cuda_impl::fail_refused;
using cuda_impl::is_refusal;
using cuda_impl::kFallbackGranularity;
using cuda_impl::read_write_access;
using cuda_impl::round_up;
using cuda_impl::ScopedDevice;

/// What register_buffer accepts on this backend, for every refusal message.
constexpr const char* kAcceptedMemory =
    "register_buffer accepts device memory of the rank's own GPU from cudaMalloc (or "
    "Comm::alloc_device) or from cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
    "allowed, inside one allocation";

/// One pointer attribute, zero when the driver does not know the pointer. The buffer is 64-bit
/// and zeroed, so 32-bit answers (booleans, enums, ordinals) read correctly too.
std::uint64_t pointer_attribute(const DriverApi& api, CUpointer_attribute attr, CUdeviceptr p,
                                CUresult* result = nullptr) {
  std::uint64_t v = 0;
  CUresult r = api.cuPointerGetAttribute(&v, attr, p);
  if (result) *result = r;
  return r == CUDA_SUCCESS ? v : 0;
}

}  // namespace

ExportedBuffer CudaBackend::export_buffer(const void* ptr, std::size_t bytes) {
  GNIO_REQUIRE(ptr && bytes > 0, "register_buffer: null pointer or 0 bytes (%p, %zu bytes)", ptr,
               bytes);
  const DriverApi& api = driver_api();
  if (!api.complete)
    fail(ErrorClass::Unsupported,
         "register_buffer on GPU %d needs the CUDA driver API, which is unavailable: %s", device_,
         api.missing.c_str());
  ScopedDevice guard(device_);
  const auto p = static_cast<CUdeviceptr>(address(ptr));
  // The runtime classifies any address without failing (plain host memory is "unregistered"),
  // so a bad argument is told apart without provoking a driver error.
  cudaPointerAttributes pa{};
  const cudaError_t pe = cudaPointerGetAttributes(&pa, ptr);
  if (pe != cudaSuccess) (void)cudaGetLastError();
  const char* what =
      pe != cudaSuccess ? "the address is unknown to CUDA"
      : pa.type == cudaMemoryTypeManaged
          ? "managed (cudaMallocManaged) memory, which cannot be shared with other processes"
      : pa.type == cudaMemoryTypeUnregistered ? "plain host memory, unknown to CUDA"
      : pa.type == cudaMemoryTypeHost         ? "host memory"
                                              : "";
  GNIO_REQUIRE(pe == cudaSuccess && pa.type == cudaMemoryTypeDevice,
               "register_buffer(%p, %zu bytes) on GPU %d: %s, not GPU device memory; %s", ptr,
               bytes, device_, what, kAcceptedMemory);
  CUresult r = CUDA_SUCCESS;
  const auto ordinal =
      static_cast<int>(pointer_attribute(api, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  GNIO_REQUIRE(ordinal == device_,
               "register_buffer(%p, %zu bytes): the memory is on GPU %d, but this rank runs on GPU "
               "%d; %s",
               ptr, bytes, ordinal, device_, kAcceptedMemory);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  r = api.cuMemGetAddressRange(&base, &size, p);
  GNIO_REQUIRE(r == CUDA_SUCCESS,
               "register_buffer(%p, %zu bytes) on GPU %d: cuMemGetAddressRange failed (%s); %s",
               ptr, bytes, device_, error_text(r).c_str(), kAcceptedMemory);
  GNIO_REQUIRE(p - base <= size && bytes <= size - (p - base),
               "register_buffer(%p, %zu bytes) on GPU %d: the range runs past the end of its "
               "allocation (0x%llx, %zu bytes); %s",
               ptr, bytes, device_, static_cast<unsigned long long>(base), size, kAcceptedMemory);

  ExportedBuffer e;
  e.desc.ptr_offset = p - base;
  e.desc.map_bytes = size;
  if (pointer_attribute(api, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) != 0) {
    cudaIpcMemHandle_t h;
    if (cudaError_t err = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
        err != cudaSuccess) {
      (void)cudaGetLastError();
      fail(ErrorClass::InvalidArgument,
           "register_buffer(%p, %zu bytes) on GPU %d: cudaIpcGetMemHandle of its allocation "
           "failed (%s); %s",
           ptr, bytes, device_, error_text(err).c_str(), kAcceptedMemory);
    }
    e.desc.kind = BufferShareKind::CudaIpc;
    std::memcpy(e.desc.ipc_handle.data(), &h, sizeof(h));
    return e;
  }
  // Not legacy-IPC memory: a VMM mapping whose allocation allows POSIX-fd export, or nothing we
  // can share (a stream-ordered pool, an imported peer allocation, ...).
  CUmemGenericAllocationHandle handle = 0;
  r = api.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base));
  GNIO_REQUIRE(r == CUDA_SUCCESS,
               "register_buffer(%p, %zu bytes) on GPU %d: the memory is neither cudaMalloc nor "
               "CUDA VMM memory (stream-ordered pool memory from cudaMallocAsync cannot be "
               "shared): %s; %s",
               ptr, bytes, device_, error_text(r).c_str(), kAcceptedMemory);
  int fd = -1;
  r = api.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  api.cuMemRelease(handle);  // the retain's reference; the fd holds its own
  if (r != CUDA_SUCCESS) {
    if (is_refusal(r) && vmm_supported_)
      fail(ErrorClass::InvalidArgument,
           "register_buffer(%p, %zu bytes) on GPU %d: the VMM allocation cannot be exported as a "
           "POSIX fd (%s); create it with requestedHandleTypes including "
           "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or use cudaMalloc memory",
           ptr, bytes, device_, error_text(r).c_str());
    fail(ErrorClass::InvalidArgument,
         "register_buffer(%p, %zu bytes) on GPU %d: exporting its VMM allocation as a POSIX fd "
         "failed (%s); %s",
         ptr, bytes, device_, error_text(r).c_str(), kAcceptedMemory);
  }
  e.desc.kind = BufferShareKind::CudaVmm;
  e.fd = fd;
  e.owns_fd = true;
  return e;
}

void CudaBackend::release_export(ExportedBuffer& e) noexcept {
  if (e.owns_fd && e.fd >= 0) ::close(e.fd);
  e = ExportedBuffer{};
}

ImportedBuffer CudaBackend::import_buffer(const BufferExport& desc, int fd) {
  ImportedBuffer b;
  b.kind = desc.kind;
  if (desc.kind == BufferShareKind::CudaIpc) {
    IpcHandle h;
    std::memcpy(h.bytes.data(), desc.ipc_handle.data(), h.bytes.size());
    b.mapping = ipc_open(h);
    b.mapping_bytes = desc.map_bytes;
    b.ptr = static_cast<char*>(b.mapping) + desc.ptr_offset;
    return b;
  }
  GNIO_REQUIRE(desc.kind == BufferShareKind::CudaVmm,
               "import_buffer on GPU %d: a node peer exported kind %u memory, not GPU memory (do "
               "all node ranks use the cuda backend?)",
               device_, static_cast<unsigned>(desc.kind));
  GNIO_REQUIRE(fd >= 0 && desc.map_bytes > 0 && desc.ptr_offset < desc.map_bytes,
               "import_buffer on GPU %d: bad description (fd %d, %llu bytes)", device_, fd,
               static_cast<unsigned long long>(desc.map_bytes));
  const DriverApi& api = driver_api();
  if (!api.complete)
    fail(ErrorClass::Unsupported, "import_buffer on GPU %d needs the CUDA driver API: %s", device_,
         api.missing.c_str());
  ScopedDevice guard(device_);
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = api.cuMemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (is_refusal(r)) fail_refused(device_, "cuMemImportFromShareableHandle (registered buffer)", r);
  if (r != CUDA_SUCCESS)
    cuda_impl::fail_driver(r, device_, "cuMemImportFromShareableHandle(fd %d) of a peer's buffer",
                           fd);
  // Aligned to this GPU's granularity for fd-exportable memory (2 MiB on Hopper), a multiple of
  // the minimum granularity of such allocations on the node's GPUs.
  const std::size_t align = std::max(granularity_, kFallbackGranularity);
  const std::size_t reserved = round_up(desc.map_bytes, align);
  CUdeviceptr va = 0;
  r = api.cuMemAddressReserve(&va, reserved, align, 0, 0);
  if (r != CUDA_SUCCESS) {
    api.cuMemRelease(handle);
    cuda_impl::fail_driver(r, device_, "cuMemAddressReserve(%zu bytes) for a peer's buffer",
                           reserved);
  }
  if (r = api.cuMemMap(va, desc.map_bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    api.cuMemAddressFree(va, reserved);
    api.cuMemRelease(handle);
    cuda_impl::fail_driver(r, device_, "cuMemMap(%llu bytes) of a peer's buffer",
                           static_cast<unsigned long long>(desc.map_bytes));
  }
  const CUmemAccessDesc access = read_write_access(cu_device_);
  if (r = api.cuMemSetAccess(va, desc.map_bytes, &access, 1); r != CUDA_SUCCESS) {
    api.cuMemUnmap(va, desc.map_bytes);
    api.cuMemAddressFree(va, reserved);
    api.cuMemRelease(handle);
    fail(ErrorClass::SystemError,
         "cuMemSetAccess for a node peer's registered buffer failed on GPU %d: %s; this GPU cannot "
         "reach the peer's GPU memory (no peer-to-peer path)",
         device_, error_text(r).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    user_imports_[va] = UserImport{desc.map_bytes, reserved, static_cast<std::uint64_t>(handle)};
  }
  b.mapping = reinterpret_cast<void*>(va);
  b.mapping_bytes = desc.map_bytes;
  b.handle = static_cast<std::uint64_t>(handle);
  b.ptr = reinterpret_cast<char*>(va) + desc.ptr_offset;
  return b;
}

void CudaBackend::release_import(ImportedBuffer& b) noexcept {
  if (b.kind == BufferShareKind::CudaIpc) {
    ipc_close(b.mapping);
  } else if (b.kind == BufferShareKind::CudaVmm && b.mapping) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto va = static_cast<CUdeviceptr>(address(b.mapping));
    auto it = user_imports_.find(va);
    if (it == user_imports_.end()) {
      GNIO_WARN(Memory, "release_import(%p) on GPU %d: not imported by import_buffer(); ignored",
                b.mapping, device_);
      b = ImportedBuffer{};
      return;
    }
    const UserImport m = it->second;
    user_imports_.erase(it);
    ScopedDevice guard = ScopedDevice::quiet(device_);
    const DriverApi& api = driver_api();
    if (CUresult r = api.cuMemUnmap(va, m.mapped); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemUnmap(registered buffer %p)", b.mapping);
    if (CUresult r = api.cuMemAddressFree(va, m.reserved); r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemAddressFree(registered buffer %p)", b.mapping);
    if (CUresult r = api.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(m.handle));
        r != CUDA_SUCCESS)
      cuda_impl::warn_driver(r, device_, "cuMemRelease(registered buffer %p)", b.mapping);
  }
  b = ImportedBuffer{};
}

}  // namespace gnio::platform
