// CudaBackend's memory: the symmetric heap's chunks (CUDA VMM, exported as POSIX fds), legacy CUDA
// IPC allocations (the heap's fallback), host memory mapped into the GPU and device memory private
// to the rank.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

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
using cuda_impl::chunk_properties;
using cuda_impl::driver_api;
using cuda_impl::DriverApi;
using cuda_impl::error_text;
using cuda_impl::fail_refused;
using cuda_impl::is_refusal;
using cuda_impl::read_write_access;
using cuda_impl::round_up;
using cuda_impl::ScopedDevice;
using cuda_impl::zero_device_memory;

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle::bytes),
              "IpcHandle must hold a cudaIpcMemHandle_t exactly");
static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(ShareableChunk::handle),
              "ShareableChunk::handle must hold a CUmemGenericAllocationHandle");

}  // namespace

// ---- symmetric heap ----------------------------------------------------------------------------

void CudaBackend::require_vmm(const char* what) const {
  if (!vmm_supported_)
    fail(ErrorClass::Unsupported,
         "%s on GPU %d needs CUDA VMM with POSIX-fd handles, which is unavailable: %s. Use legacy "
         "CUDA IPC with GNIO_MEM_MAP=ipc (GNIO_MEM_MAP=auto falls back by itself)",
         what, device_, vmm_unsupported_reason_.c_str());
}

// Callers hold mutex_.
void CudaBackend::require_in_reservation(const void* at, std::size_t bytes,
                                         const char* what) const {
  const std::uintptr_t va = address(at);
  bool inside = false;
  // The reservation holding `va`, if any, is the last one starting at or below it.
  if (auto it = reservations_.upper_bound(va); it != reservations_.begin()) {
    --it;
    const std::size_t offset = va - it->first;
    inside = offset < it->second && bytes <= it->second - offset;
  }
  GNIO_REQUIRE(inside,
               "%s(%p, %zu bytes) on GPU %d: the range is not inside a reservation made by "
               "reserve() on this backend",
               what, at, bytes, device_);
}

void* CudaBackend::reserve(std::size_t bytes, std::size_t align) {
  require_vmm("reserve");
  GNIO_REQUIRE(bytes > 0 && bytes <= (std::size_t{1} << 62),
               "reserve(%zu bytes): the size must be positive and below 2^62", bytes);
  GNIO_REQUIRE((align & (align - 1)) == 0, "reserve: alignment %zu is not a power of two", align);
  const std::size_t size = round_up(bytes, granularity_);
  const std::size_t alignment = std::max(align, granularity_);
  ScopedDevice guard(device_);
  CUdeviceptr va = 0;
  GNIO_CU_CHECK(device_, driver_api().cuMemAddressReserve(&va, size, alignment, 0, 0),
                "cuMemAddressReserve(%zu bytes, alignment %zu)", size, alignment);
  std::lock_guard<std::mutex> lock(mutex_);
  reservations_[va] = size;
  return reinterpret_cast<void*>(va);
}

void CudaBackend::release(void* va, std::size_t bytes) {
  require_vmm("release");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = reservations_.find(address(va));
  GNIO_REQUIRE(it != reservations_.end(),
               "release(%p) on GPU %d: not a reservation of this backend", va, device_);
  GNIO_REQUIRE(round_up(bytes, granularity_) == it->second,
               "release(%p, %zu bytes) on GPU %d: the reservation is %zu bytes", va, bytes, device_,
               it->second);
  auto m = mappings_.lower_bound(it->first);
  GNIO_REQUIRE(m == mappings_.end() || m->first >= it->first + it->second,
               "release(%p) on GPU %d: chunk still mapped at 0x%zx; unmap_chunk() it first", va,
               device_, size_t{m->first});
  ScopedDevice guard(device_);
  GNIO_CU_CHECK(device_, driver_api().cuMemAddressFree(it->first, it->second),
                "cuMemAddressFree(%p, %zu bytes)", va, it->second);
  reservations_.erase(it);
}

void CudaBackend::zero_chunk(std::uint64_t handle, std::size_t bytes) {
  // A fresh chunk is mapped once, privately, to clear it: the host backend's memfd chunks start
  // zeroed, and protocol code (signal slots, flags) relies on that on both backends.
  const DriverApi& api = driver_api();
  CUdeviceptr va = 0;
  GNIO_CU_CHECK(device_, api.cuMemAddressReserve(&va, bytes, granularity_, 0, 0),
                "cuMemAddressReserve(%zu bytes) to zero a new chunk", bytes);
  bool mapped = false;
  try {
    GNIO_CU_CHECK(device_, api.cuMemMap(va, bytes, 0, handle, 0),
                  "cuMemMap(%zu bytes) to zero a new chunk", bytes);
    mapped = true;
    const CUmemAccessDesc access = read_write_access(cu_device_);
    GNIO_CU_CHECK(device_, api.cuMemSetAccess(va, bytes, &access, 1),
                  "cuMemSetAccess(%zu bytes) to zero a new chunk", bytes);
    zero_device_memory(reinterpret_cast<void*>(va), bytes, device_, internal_stream_);
  } catch (...) {
    if (mapped) api.cuMemUnmap(va, bytes);
    api.cuMemAddressFree(va, bytes);
    throw;
  }
  GNIO_CU_CHECK(device_, api.cuMemUnmap(va, bytes), "cuMemUnmap(%zu bytes) after zeroing", bytes);
  GNIO_CU_CHECK(device_, api.cuMemAddressFree(va, bytes), "cuMemAddressFree(%zu bytes)", bytes);
}

ShareableChunk CudaBackend::create_chunk(std::size_t bytes) {
  require_vmm("create_chunk");
  GNIO_REQUIRE(bytes > 0 && bytes % granularity_ == 0,
               "create_chunk(%zu bytes) on GPU %d: the size must be a positive multiple of the "
               "granularity (%zu bytes)",
               bytes, device_, granularity_);
  ScopedDevice guard(device_);
  const DriverApi& api = driver_api();

  const CUmemAllocationProp prop = chunk_properties(cu_device_, gdr_capable_vmm_);
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = api.cuMemCreate(&handle, bytes, &prop, 0);
  if (is_refusal(r)) fail_refused(device_, "cuMemCreate", r);
  if (r != CUDA_SUCCESS) cuda_impl::fail_driver(r, device_, "cuMemCreate(%zu bytes)", bytes);

  int fd = -1;
  r = api.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) {
    api.cuMemRelease(handle);
    if (is_refusal(r)) fail_refused(device_, "cuMemExportToShareableHandle", r);
    cuda_impl::fail_driver(r, device_, "cuMemExportToShareableHandle(POSIX fd, %zu bytes)", bytes);
  }
  try {
    zero_chunk(handle, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    own_chunks_[fd] = handle;
  } catch (...) {
    ::close(fd);
    api.cuMemRelease(handle);
    throw;
  }
  GNIO_TRACE(Memory, "GPU %d: created chunk of %zu bytes, fd %d", device_, bytes, fd);
  return ShareableChunk{fd, bytes, static_cast<std::uint64_t>(handle)};
}

void CudaBackend::map_chunk(void* at, std::size_t bytes, int fd, bool own) {
  require_vmm("map_chunk");
  const std::uintptr_t va = address(at);
  GNIO_REQUIRE(at && bytes > 0 && bytes % granularity_ == 0 && va % granularity_ == 0,
               "map_chunk(%p, %zu bytes) on GPU %d: address and size must be positive multiples "
               "of the granularity (%zu bytes)",
               at, bytes, device_, granularity_);
  GNIO_REQUIRE(fd >= 0, "map_chunk(%p) on GPU %d: invalid file descriptor %d", at, device_, fd);
  std::lock_guard<std::mutex> lock(mutex_);
  require_in_reservation(at, bytes, "map_chunk");
  auto next = mappings_.lower_bound(va);
  bool overlaps =
      (next != mappings_.end() && next->first < va + bytes) ||
      (next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > va);
  GNIO_REQUIRE(!overlaps, "map_chunk(%p, %zu bytes) on GPU %d: overlaps an existing mapping", at,
               bytes, device_);
  // An own chunk is mapped through its local handle when `fd` is the one create_chunk() returned.
  // Any other fd (a dup of it, as an fd exchange hands back for the own slot, or a peer's) is
  // imported: the driver resolves it to the same allocation, and the mapping holds that reference.
  CUmemGenericAllocationHandle handle = 0;
  bool import = true;
  if (auto it = own_chunks_.find(fd); own && it != own_chunks_.end()) {
    handle = it->second;
    import = false;
  }

  ScopedDevice guard(device_);
  const DriverApi& api = driver_api();
  if (import) {
    // The driver takes the fd by value, cast to a pointer, and keeps no reference to it: the
    // caller may close `fd` as soon as this returns.
    CUresult r = api.cuMemImportFromShareableHandle(
        &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (is_refusal(r)) fail_refused(device_, "cuMemImportFromShareableHandle", r);
    if (r != CUDA_SUCCESS)
      cuda_impl::fail_driver(r, device_,
                             "cuMemImportFromShareableHandle(fd %d) of %s chunk (is it an fd of a "
                             "live chunk, received with SCM_RIGHTS?)",
                             fd, own ? "this rank's" : "a peer's");
  }
  auto undo_import = [&] {
    if (import) api.cuMemRelease(handle);
  };
  if (CUresult r = api.cuMemMap(va, bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    undo_import();
    cuda_impl::fail_driver(r, device_, "cuMemMap(%p, %zu bytes, %s chunk fd %d)", at, bytes,
                           own ? "own" : "peer", fd);
  }
  const CUmemAccessDesc access = read_write_access(cu_device_);
  if (CUresult r = api.cuMemSetAccess(va, bytes, &access, 1); r != CUDA_SUCCESS) {
    api.cuMemUnmap(va, bytes);
    undo_import();
    if (own) cuda_impl::fail_driver(r, device_, "cuMemSetAccess(%p, %zu bytes)", at, bytes);
    fail(ErrorClass::SystemError,
         "cuMemSetAccess(%p, %zu bytes) for a peer's chunk failed on GPU %d: %s. This GPU cannot "
         "reach the peer's GPU memory (no peer-to-peer path between the two GPUs; `gnio-info` "
         "lists which pairs can); place the ranks on GPUs that can, or declare them on different "
         "nodes (GNIO_NODE_ID) so they communicate through the network transport",
         at, bytes, device_, error_text(r).c_str());
  }
  mappings_[va] = Mapping{bytes, static_cast<std::uint64_t>(handle), import};
  GNIO_TRACE(Memory, "GPU %d: mapped %s chunk (fd %d) at %p, %zu bytes", device_,
             own ? "own" : "peer", fd, at, bytes);
}

void CudaBackend::unmap_chunk(void* at, std::size_t bytes) {
  require_vmm("unmap_chunk");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = mappings_.find(address(at));
  GNIO_REQUIRE(it != mappings_.end() && it->second.bytes == bytes,
               "unmap_chunk(%p, %zu bytes) on GPU %d: no mapping of that address and size", at,
               bytes, device_);
  ScopedDevice guard(device_);
  const DriverApi& api = driver_api();
  GNIO_CU_CHECK(device_, api.cuMemUnmap(it->first, bytes), "cuMemUnmap(%p, %zu bytes)", at, bytes);
  const Mapping m = it->second;
  mappings_.erase(it);
  if (m.imported)
    GNIO_CU_CHECK(device_, api.cuMemRelease(m.handle), "cuMemRelease(peer chunk mapped at %p)", at);
}

void CudaBackend::close_chunk(ShareableChunk& chunk) {
  if (chunk.fd < 0 && chunk.handle == 0) return;  // already closed
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = own_chunks_.find(chunk.fd);
  GNIO_REQUIRE(it != own_chunks_.end() && it->second == chunk.handle,
               "close_chunk(fd %d) on GPU %d: not a chunk created by this backend", chunk.fd,
               device_);
  for (const auto& [va, m] : mappings_)
    GNIO_REQUIRE(m.imported || m.handle != chunk.handle,
                 "close_chunk(fd %d) on GPU %d: the chunk is still mapped at 0x%zx; unmap_chunk() "
                 "it first",
                 chunk.fd, device_, size_t{va});
  own_chunks_.erase(it);
  ScopedDevice guard(device_);
  CUresult r = driver_api().cuMemRelease(chunk.handle);
  ::close(chunk.fd);
  const int fd = chunk.fd;
  chunk = ShareableChunk{};
  if (r != CUDA_SUCCESS) cuda_impl::fail_driver(r, device_, "cuMemRelease(chunk fd %d)", fd);
}

// ---- legacy CUDA IPC ---------------------------------------------------------------------------

bool CudaBackend::chunks_shareable(std::string* why) const {
  if (!vmm_supported_ && why) *why = vmm_unsupported_reason_;
  return vmm_supported_;
}

IpcAllocation CudaBackend::ipc_alloc(std::size_t bytes) {
  GNIO_REQUIRE(bytes > 0, "ipc_alloc(0 bytes) on GPU %d: the size must be positive", device_);
  ScopedDevice guard(device_);
  void* p = nullptr;
  GNIO_CUDA_CHECK(device_, cudaMalloc(&p, bytes), "cudaMalloc(%zu bytes) for CUDA IPC", bytes);
  IpcAllocation out;
  try {
    zero_device_memory(p, bytes, device_, internal_stream_);
    cudaIpcMemHandle_t h;
    GNIO_CUDA_CHECK(device_, cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle(%p)", p);
    std::memcpy(out.handle.bytes.data(), &h, sizeof(h));
    std::lock_guard<std::mutex> lock(mutex_);
    ipc_allocations_[address(p)] = bytes;
  } catch (...) {
    cudaFree(p);
    throw;
  }
  out.ptr = p;
  out.bytes = bytes;
  return out;
}

void* CudaBackend::ipc_open(const IpcHandle& handle) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes.data(), sizeof(h));
  ScopedDevice guard(device_);
  void* p = nullptr;
  GNIO_CUDA_CHECK(device_, cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                  "cudaIpcOpenMemHandle (the handle must come from ipc_alloc() in another "
                  "process on this node, and that allocation must still be alive)");
  std::lock_guard<std::mutex> lock(mutex_);
  ++ipc_opened_[address(p)];
  return p;
}

void CudaBackend::ipc_close(void* peer_ptr) noexcept {
  if (!peer_ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ipc_opened_.find(address(peer_ptr));
  if (it == ipc_opened_.end()) {
    GNIO_WARN(Memory, "ipc_close(%p) on GPU %d: not opened by ipc_open(); ignored", peer_ptr,
              device_);
    return;
  }
  if (--it->second == 0) ipc_opened_.erase(it);
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaIpcCloseMemHandle(peer_ptr); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaIpcCloseMemHandle(%p)", peer_ptr);
}

void CudaBackend::ipc_free(void* ptr) noexcept {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (ipc_allocations_.erase(address(ptr)) == 0) {
    GNIO_WARN(Memory, "ipc_free(%p) on GPU %d: not allocated by ipc_alloc(); ignored", ptr,
              device_);
    return;
  }
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaFree(ptr); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaFree(%p) of an IPC allocation", ptr);
}

// ---- host-mapped and device memory -------------------------------------------------------------

void* CudaBackend::alloc_host_mapped(std::size_t bytes) {
  GNIO_REQUIRE(bytes > 0, "alloc_host_mapped(0 bytes) on GPU %d: the size must be positive",
               device_);
  ScopedDevice guard(device_);
  void* p = nullptr;
  GNIO_CUDA_CHECK(device_, cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                  "cudaHostAlloc(%zu bytes, mapped | portable)", bytes);
  std::memset(p, 0, bytes);
  // With unified addressing the device sees the host pointer itself; gnio hands that one pointer
  // to kernels and host code alike, so anything else is a broken assumption, not a fallback case.
  void* on_device = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&on_device, p, 0);
  if (e != cudaSuccess || on_device != p) {
    cudaFreeHost(p);
    if (e != cudaSuccess) cuda_impl::fail_runtime(e, device_, "cudaHostGetDevicePointer(%p)", p);
    fail(ErrorClass::Internal,
         "GPU %d maps host memory %p at a different device address %p although it reports "
         "unified addressing; gnio needs one address for both; please report this",
         device_, p, on_device);
  }
  return p;
}

void CudaBackend::register_host(void* p, std::size_t bytes) {
  GNIO_REQUIRE(p && bytes > 0, "register_host(%p, %zu bytes) on GPU %d: nothing to register", p,
               bytes, device_);
  ScopedDevice guard(device_);
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(ErrorClass::Unsupported,
         "GPU %d cannot map host memory %p (%zu bytes) into its address space: "
         "cudaHostRegister failed: %s",
         device_, p, bytes, cudaGetErrorString(e));
  }
  void* on_device = nullptr;
  e = cudaHostGetDevicePointer(&on_device, p, 0);
  if (e != cudaSuccess || on_device != p) {
    (void)cudaGetLastError();
    (void)cudaHostUnregister(p);
    fail(ErrorClass::Unsupported,
         "GPU %d maps registered host memory %p at %p (%s); gnio needs the same address in "
         "kernels and on the host",
         device_, p, on_device, cudaGetErrorString(e));
  }
}

void CudaBackend::unregister_host(void* p) noexcept {
  if (!p) return;
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaHostUnregister(p); e != cudaSuccess) {
    (void)cudaGetLastError();
    GNIO_WARN(Memory, "cudaHostUnregister(%p) on GPU %d: %s (ignored)", p, device_,
              cudaGetErrorString(e));
  }
}

void CudaBackend::free_host_mapped(void* p) noexcept {
  if (!p) return;
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaFreeHost(p); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaFreeHost(%p)", p);
}

void* CudaBackend::alloc_device(std::size_t bytes) {
  GNIO_REQUIRE(bytes > 0, "alloc_device(0 bytes) on GPU %d: the size must be positive", device_);
  ScopedDevice guard(device_);
  void* p = nullptr;
  GNIO_CUDA_CHECK(device_, cudaMalloc(&p, bytes), "cudaMalloc(%zu bytes)", bytes);
  return p;
}

void CudaBackend::free_device(void* p) noexcept {
  if (!p) return;
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaFree(p); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaFree(%p)", p);
}

}  // namespace gnio::platform
