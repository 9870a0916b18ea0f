#include "platform/cuda/cuda_backend.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/cuda/cuda_driver.hpp"
#include "platform/cuda/cuda_error.hpp"
#include "platform/cuda/cuda_stream_ops.hpp"
#include "platform/gpu_info.hpp"

namespace gnio::platform {
namespace {

using cuda_impl::driver_api;
using cuda_impl::DriverApi;
using cuda_impl::error_text;

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle::bytes),
              "IpcHandle must hold a cudaIpcMemHandle_t exactly");
static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(ShareableChunk::handle),
              "ShareableChunk::handle must hold a CUmemGenericAllocationHandle");

/// The granule of cudaMalloc'ed memory, used as granularity() where VMM is unavailable.
constexpr std::size_t kFallbackGranularity = std::size_t{2} << 20;

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

/// Makes `device` current on the calling thread for one backend call, then restores the device
/// the thread had. A thread without a current context is left on `device`: "restoring" it with
/// cudaSetDevice would create a context on GPU 0, costing that GPU hundreds of MiB per process.
class ScopedDevice {
 public:
  /// Throws Error(SystemError) when the device cannot be made current.
  explicit ScopedDevice(int device) : ScopedDevice(device, true) {}
  /// For noexcept paths: a failure is logged and the call goes on with whatever is current.
  /// (Returned by guaranteed copy elision: the class is neither copyable nor movable.)
  static ScopedDevice quiet(int device) noexcept { return ScopedDevice(device, false); }

  ~ScopedDevice() {
    if (restore_ >= 0 && cudaSetDevice(restore_) != cudaSuccess) (void)cudaGetLastError();
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  ScopedDevice(int device, bool throwing) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) {
      (void)cudaGetLastError();
      current = -1;
    }
    if (current == device) return;
    CUcontext ctx = nullptr;
    const DriverApi& api = driver_api();
    bool had_context = api.cuCtxGetCurrent && api.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx;
    if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
      if (throwing) cuda_impl::fail_runtime(err, device, "cudaSetDevice(%d)", device);
      cuda_impl::warn_runtime(err, device, "cudaSetDevice(%d)", device);
      return;
    }
    if (had_context) restore_ = current;
  }

  int restore_ = -1;  // device to make current again, or -1
};

/// The stream behind a StreamRef; a host-backend stream is the caller's mistake.
cudaStream_t cuda_stream(StreamRef s, int device) {
  GNIO_REQUIRE(!s.is_host(),
               "a host-backend stream was passed to the cuda backend (GPU %d); use a Stream "
               "created on this communicator or a cudaStream_t",
               device);
  return s.cuda();
}

std::size_t round_up(std::size_t n, std::size_t granule) {
  return (n + granule - 1) / granule * granule;
}

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

/// Zero-fills device memory and waits for it, on the backend's own non-blocking stream: neither
/// the legacy default stream nor the per-thread one would do, as both wait for the application's
/// work on stream 0, which may itself be waiting for this rank to finish setting up.
void zero_device_memory(void* p, std::size_t bytes, int device, cudaStream_t stream) {
  GNIO_CUDA_CHECK(device, cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync(%p, 0, %zu bytes)",
                  p, bytes);
  GNIO_CUDA_CHECK(device, cudaStreamSynchronize(stream),
                  "cudaStreamSynchronize (zero-filling %zu bytes)", bytes);
}

/// Properties of every heap chunk: pinned memory on the GPU, exportable as a POSIX fd, and
/// registrable with a NIC later (GPUDirect RDMA through UCX) where the driver can set that at
/// creation time.
CUmemAllocationProp chunk_properties(int cu_device, bool gdr_capable) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cu_device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = gdr_capable ? 1 : 0;
  return prop;
}

/// Read/write access for kernels on `cu_device`: VMM mappings start inaccessible, even to the GPU
/// that owns the memory.
CUmemAccessDesc read_write_access(int cu_device) {
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cu_device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

/// Driver answers that mean "this system does not allow fd-shared VMM memory" rather than a
/// failure of this particular call: the memory layer falls back to legacy CUDA IPC on these.
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

// ---- user buffers ------------------------------------------------------------------------------

namespace {

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

// ---- streams -----------------------------------------------------------------------------------

void CudaBackend::create_stream(CUstream_st** cuda, detail::HostStream** host) {
  GNIO_REQUIRE(cuda, "create_stream on GPU %d: the cuda out-pointer is null", device_);
  if (host) *host = nullptr;
  ScopedDevice guard(device_);
  cudaStream_t s = nullptr;
  // Non-blocking: gnio's streams must not serialise with the application's legacy default stream,
  // or a collective waiting for a peer could wait behind unrelated work (and deadlock with it).
  GNIO_CUDA_CHECK(device_, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags(non-blocking)");
  *cuda = s;
}

void CudaBackend::destroy_stream(CUstream_st* cuda, detail::HostStream* host) noexcept {
  if (host)
    GNIO_WARN(Init, "destroy_stream on GPU %d: a host-backend stream was passed; ignored", device_);
  if (!cuda) return;
  ScopedDevice guard = ScopedDevice::quiet(device_);
  if (cudaError_t e = cudaStreamDestroy(cuda); e != cudaSuccess)
    cuda_impl::warn_runtime(e, device_, "cudaStreamDestroy(%p)", static_cast<void*>(cuda));
}

bool CudaBackend::stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) {
  // The CUDA runtime can block a thread until a stream ends, but not for a bounded time, so this
  // polls: quickly for the first 100 queries (short kernels end within them), then every 200 us.
  const auto until = std::chrono::steady_clock::now() + at_most;
  for (int polls = 0;; ++polls) {
    if (stream_idle(s)) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 5 : 200));
  }
}

bool CudaBackend::stream_idle(StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  ScopedDevice guard(device_);
  cudaError_t e = cudaStreamQuery(stream);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error a launch check should see
    return false;
  }
  cuda_impl::fail_runtime(e, device_, "cudaStreamQuery(%p)", static_cast<void*>(stream));
}

void CudaBackend::stream_synchronize(StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaStreamSynchronize(stream), "cudaStreamSynchronize(%p)",
                  static_cast<void*>(stream));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t n, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  if (n == 0) return;
  GNIO_REQUIRE(dst && src, "copy(%p <- %p, %zu bytes) on GPU %d: null address", dst, src, n,
               device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream),
                  "cudaMemcpyAsync(%p <- %p, %zu bytes)", dst, src, n);
}

void CudaBackend::fill(void* dst, int value, std::size_t n, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  if (n == 0) return;
  GNIO_REQUIRE(dst, "fill(%p, %zu bytes) on GPU %d: null address", dst, n, device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaMemsetAsync(dst, value, n, stream),
                  "cudaMemsetAsync(%p, 0x%02x, %zu bytes)", dst, value & 0xff, n);
}

void CudaBackend::word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                              std::uint64_t expected, std::uint64_t* old, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(
      word && (width == 4 || width == 8) && reinterpret_cast<std::uintptr_t>(word) % width == 0,
      "word_atomic on GPU %d: %p is not an aligned %u-byte word", device_, word, width);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_,
                  launch_word_atomic_kernel(word, width, op, operand, expected, old, stream),
                  "launching the word_atomic kernel (%u bytes at %p)", width, word);
}

void CudaBackend::deliver(const Delivery& d, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(well_formed(d),
               "deliver on GPU %d: bad delivery (%zu bytes %p -> %p, signal word %p, mark word %p)",
               device_, d.bytes, d.src, d.dst, static_cast<void*>(d.word),
               static_cast<void*>(d.done));
  ScopedDevice guard(device_);
  Delivery rest = d;
  if (d.bytes > kDeliverKernelBytes) {
    // The copy engine moves large data faster than threads reading over the bus.
    GNIO_CUDA_CHECK(device_, cudaMemcpyAsync(d.dst, d.src, d.bytes, cudaMemcpyDefault, stream),
                    "cudaMemcpyAsync(%p <- %p, %zu bytes) (deliver)", d.dst, d.src, d.bytes);
    rest.bytes = 0;
  }
  if (rest.bytes == 0 && !rest.word && !rest.done) return;
  GNIO_CUDA_CHECK(device_, launch_deliver_kernel(rest, stream),
                  "launching the deliver kernel (%zu bytes to %p, signal word %p)", rest.bytes,
                  rest.dst, static_cast<void*>(rest.word));
}

void CudaBackend::deliver_batch(const Delivery* d, std::size_t count, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  const std::string who = "deliver_batch on GPU " + std::to_string(device_);
  require_deliverable_batch(d, count, who.c_str());
  if (count == 0) return;
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, launch_deliver_batch_kernel(d, count, stream),
                  "launching the deliver kernel for a batch of %zu deliveries", count);
}

void CudaBackend::start_delivery_agent(DeliveryRing* ring, StreamRef s) {
  cudaStream_t stream = cuda_stream(s, device_);
  GNIO_REQUIRE(ring, "start_delivery_agent on GPU %d: no ring", device_);
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, launch_delivery_agent_kernel(ring, stream),
                  "launching the delivery agent (ring %p)", static_cast<void*>(ring));
}

void CudaBackend::device_synchronize() {
  ScopedDevice guard(device_);
  GNIO_CUDA_CHECK(device_, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
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
