// Memory of the host backend that is not the symmetric heap: "device memory" (alloc_device) and
// "host-mapped memory" (alloc_host_mapped).
//
// Device memory comes from one process-wide arena: a single sparse memfd (GNIO_HOST_DEVICE_MEM
// long, memory committed only where written) mapped once, and sub-allocated in whole pages. One
// fd for all allocations instead of one per allocation, because a test may hold thousands of
// buffers and CI's fd limit is often 1024. Any device allocation can be shared with node peers
// (user-buffer registration) by sending them the arena fd and the allocation's offset:
// host_backend_find_shareable() answers that question.
#pragma once

#include <cstddef>
#include <optional>

namespace gnio::platform {

/// Where an alloc_device() allocation lives in a shareable file: a peer that receives `fd`
/// (SCM_RIGHTS) maps `size` bytes at file offset `offset` and sees the same memory as `base`.
struct HostShareableRange {
  int fd = -1;             ///< the arena's memfd; owned by the arena, do not close
  std::size_t offset = 0;  ///< file offset of `base`; a multiple of the page size
  void* base = nullptr;    ///< start of the allocation containing the queried address
  std::size_t size = 0;    ///< bytes of that allocation (whole pages)
};

/// The allocation made by the host backend's alloc_device() that contains `p` (any address inside
/// it, not only its start), or nullopt when `p` is not in live host device memory. Thread-safe.
std::optional<HostShareableRange> host_backend_find_shareable(const void* p);

namespace host {

/// The system page size (the host backend's mapping granularity).
std::size_t page_size() noexcept;

/// Allocates `bytes` of device memory from the arena: page-aligned, zero-filled, shareable.
/// nullptr for 0 bytes. Throws Error(SystemError) when the arena is exhausted.
void* device_alloc(std::size_t bytes);
/// Frees a device_alloc() allocation (its pages go back to the system). Unknown pointers are
/// logged and ignored; nullptr is a no-op.
void device_free(void* p) noexcept;

/// Allocates zero-filled, page-aligned anonymous memory (safe for atomics between any threads
/// of this process). nullptr for 0 bytes. Throws Error(SystemError) when out of memory.
void* mapped_alloc(std::size_t bytes);
/// Frees a mapped_alloc() allocation. Unknown pointers are logged and ignored.
void mapped_free(void* p) noexcept;

}  // namespace host
}  // namespace gnio::platform
