// What the cuda backend's memory code shares (cuda_backend.cpp, cuda_backend_memory.cpp,
// cuda_backend_buffers.cpp): the properties and access of VMM allocations, the driver answers that
// mean "fd-shared VMM memory is refused here", zero-filling, and address arithmetic. Private to
// src/platform/cuda/.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gnio::platform::cuda_impl {

/// The granule of cudaMalloc'ed memory, used as granularity() where VMM is unavailable.
inline constexpr std::size_t kFallbackGranularity = std::size_t{2} << 20;

/// `n` rounded up to a multiple of `granule`.
std::size_t round_up(std::size_t n, std::size_t granule);
/// `p` as an integer (the key of the backend's address maps).
std::uintptr_t address(const void* p);

/// Zero-fills device memory and waits for it, on the backend's own non-blocking stream: neither
/// the legacy default stream nor the per-thread one would do, as both wait for the application's
/// work on stream 0, which may itself be waiting for this rank to finish setting up.
void zero_device_memory(void* p, std::size_t bytes, int device, cudaStream_t stream);

/// Properties of every heap chunk: pinned memory on the GPU, exportable as a POSIX fd, and
/// registrable with a NIC later (GPUDirect RDMA through UCX) where the driver can set that at
/// creation time.
CUmemAllocationProp chunk_properties(int cu_device, bool gdr_capable);

/// Read/write access for kernels on `cu_device`: VMM mappings start inaccessible, even to the GPU
/// that owns the memory.
CUmemAccessDesc read_write_access(int cu_device);

/// Driver answers that mean "this system does not allow fd-shared VMM memory" rather than a
/// failure of this particular call: the memory layer falls back to legacy CUDA IPC on these.
bool is_refusal(CUresult r);

/// Throws Error(Unsupported) for a refusal (is_refusal()) of `call` on GPU `device`, naming
/// GNIO_MEM_MAP=ipc as the way out.
[[noreturn]] void fail_refused(int device, const char* call, CUresult r);

}  // namespace gnio::platform::cuda_impl
