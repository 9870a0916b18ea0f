// The host backend's device-memory arena and host-mapped allocations (see host_memory.hpp).
#include "platform/host/host_memory.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio::platform {
namespace host {
namespace {

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Sub-allocates one sparse memfd mapped once into this process. First fit over a free list
/// with coalescing: allocation counts on the host backend are small, so simplicity wins.
class DeviceArena {
 public:
  /// Creates the memfd of `capacity` bytes and maps it. Throws Error(SystemError).
  explicit DeviceArena(std::size_t capacity) : capacity_(capacity) {
    fd_ = memfd_create("gnio-device", MFD_CLOEXEC);
    if (fd_ < 0) fail_errno("host backend: memfd_create for device memory failed");
    // memfd files are created with VM_NORESERVE: a huge size costs nothing until pages are
    // touched, so the arena can be generous without committing memory.
    if (ftruncate(fd_, static_cast<off_t>(capacity_)) != 0) {
      const int err = errno;
      close(fd_);
      errno = err;
      fail_errno(
          "host backend: sizing the device-memory arena to %zu bytes failed; lower "
          "GNIO_HOST_DEVICE_MEM",
          capacity_);
    }
    void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd_);
      errno = err;
      fail_errno(
          "host backend: mapping the %zu-byte device-memory arena failed; lower "
          "GNIO_HOST_DEVICE_MEM",
          capacity_);
    }
    base_ = static_cast<unsigned char*>(p);
    free_.emplace(0, capacity_);
    GNIO_INFO(Memory, "host device-memory arena: %zu bytes of address space at %p (memfd %d)",
              capacity_, p, fd_);
  }

  void* alloc(std::size_t bytes) {
    const std::size_t size = round_up(bytes, page_size());
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const std::size_t offset = it->first;
      const std::size_t rest = it->second - size;
      free_.erase(it);
      if (rest) free_.emplace(offset + size, rest);
      used_ += size;
      void* p = base_ + offset;
      live_.emplace(reinterpret_cast<std::uintptr_t>(p), size);
      return p;
    }
    fail(ErrorClass::SystemError,
         "host backend: out of device memory: %zu bytes requested, %zu of %zu bytes in use or "
         "fragmented; free buffers or raise GNIO_HOST_DEVICE_MEM",
         bytes, used_, capacity_);
  }

  /// False when `p` is not the start of a live allocation.
  bool free(void* p) noexcept {
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == live_.end()) return false;
    const std::size_t size = it->second;
    std::size_t offset = static_cast<std::size_t>(static_cast<unsigned char*>(p) - base_);
    live_.erase(it);
    used_ -= size;
    // Give the pages back, so freed device memory stops counting against the machine and a
    // later allocation of the same range reads zeros again. A peer still mapping it (a freed
    // registered buffer) sees zeros rather than stale data.
    if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(size)) != 0) {
      // Not fatal: the range is still free for reuse, it just is not zero any more.
      GNIO_TRACE(Memory, "host backend: releasing device pages failed: %s", std::strerror(errno));
      std::memset(p, 0, size);
    }
    std::size_t bytes = size;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        free_.erase(prev);
      }
    }
    free_.emplace(offset, bytes);
    return true;
  }

  std::optional<HostShareableRange> find(const void* p) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = live_.upper_bound(addr);
    if (it == live_.begin()) return std::nullopt;
    --it;
    if (addr >= it->first + it->second) return std::nullopt;
    HostShareableRange r;
    r.fd = fd_;
    r.base = reinterpret_cast<void*>(it->first);
    r.size = it->second;
    r.offset = static_cast<std::size_t>(it->first - reinterpret_cast<std::uintptr_t>(base_));
    return r;
  }

 private:
  int fd_ = -1;
  unsigned char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  /// Free ranges: file offset -> bytes.
  std::map<std::size_t, std::size_t> free_;
  /// Live allocations: address -> bytes.
  std::map<std::uintptr_t, std::size_t> live_;
};

/// Guards everything below. One lock for both registries: allocation is not a hot path.
std::mutex g_mu;
/// Created on first alloc_device, never destroyed (pointers into it may outlive any backend).
DeviceArena* g_arena = nullptr;
/// alloc_host_mapped allocations: address -> bytes (munmap needs the length).
std::map<void*, std::size_t>* g_mapped = nullptr;

/// Registers the fork handlers once. A forked child inherits the arena's MAP_SHARED mapping and
/// its bookkeeping; if the child kept allocating from it, parent and child would hand out the
/// same pages for different buffers. So the child starts a fresh arena (with its own memfd) on
/// its next allocation; inherited pointers stay mapped (and shared with the parent, as
/// MAP_SHARED memory is after fork). g_mu is held across fork() so no copy is half-updated.
void ensure_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); },
                   [] {
                     g_arena = nullptr;  // leaked on purpose: its mapping still backs old pointers
                     g_mu.unlock();
                   });
  });
}

}  // namespace

std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void* device_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  ensure_fork_handlers();
  // Read the size outside the lock: a bad value throws InvalidArgument.
  std::size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_arena) return g_arena->alloc(bytes);
  }
  capacity = round_up(config_size("GNIO_HOST_DEVICE_MEM"), page_size());
  GNIO_REQUIRE(capacity > 0, "GNIO_HOST_DEVICE_MEM must be larger than 0");
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_arena) g_arena = new DeviceArena(capacity);
  return g_arena->alloc(bytes);
}

void device_free(void* p) noexcept {
  if (!p) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_arena || !g_arena->free(p))
    GNIO_WARN(Memory,
              "host backend: free_device(%p) ignored: not the start of a live alloc_device "
              "allocation of this process",
              p);
}

void* mapped_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  ensure_fork_handlers();
  const std::size_t size = round_up(bytes, page_size());
  // Anonymous pages are zero-filled and page-aligned; private is enough because only threads of
  // this process (kernel threads, proxy threads) share them.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail_errno("host backend: alloc_host_mapped(%zu bytes) failed", bytes);
  try {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_mapped) g_mapped = new std::map<void*, std::size_t>();
    g_mapped->emplace(p, size);
  } catch (...) {
    munmap(p, size);
    throw;
  }
  return p;
}

void mapped_free(void* p) noexcept {
  if (!p) return;
  std::size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_mapped) {
      if (auto it = g_mapped->find(p); it != g_mapped->end()) {
        size = it->second;
        g_mapped->erase(it);
      }
    }
  }
  if (size == 0) {
    GNIO_WARN(Memory,
              "host backend: free_host_mapped(%p) ignored: not a live alloc_host_mapped "
              "allocation",
              p);
    return;
  }
  munmap(p, size);
}

}  // namespace host

std::optional<HostShareableRange> host_backend_find_shareable(const void* p) {
  std::lock_guard<std::mutex> lock(host::g_mu);
  if (!host::g_arena) return std::nullopt;
  return host::g_arena->find(p);
}

}  // namespace gnio::platform
