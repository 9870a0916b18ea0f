// The host platform backend (see host_backend.hpp).
#include "platform/host/host_backend.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "platform/delivery_agent.hpp"
#include "platform/host/host_memory.hpp"
#include "platform/host/host_stream.hpp"
#include "platform/word_op.hpp"

namespace gnio::platform {
namespace {

bool is_pow2(std::size_t v) {
  return v && !(v & (v - 1));
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

}  // namespace

HostBackend::HostBackend() = default;

HostBackend::~HostBackend() {
  std::unordered_map<detail::HostStream*, std::shared_ptr<detail::HostStream>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(streams_);
  }
  if (!left.empty())
    GNIO_WARN(Device, "host backend destroyed with %zu streams still alive; draining them",
              left.size());
  for (auto& [raw, stream] : left) stream->shutdown();
}

std::string HostBackend::describe() const {
  return format("host CPU backend, %d cores", usable_cpus());
}

std::size_t HostBackend::granularity() const {
  return host::page_size();
}

void* HostBackend::reserve(std::size_t bytes, std::size_t align) {
  const std::size_t gran = granularity();
  GNIO_REQUIRE(bytes > 0, "host backend reserve: 0 bytes requested");
  GNIO_REQUIRE(align == 0 || is_pow2(align),
               "host backend reserve: alignment %zu is not a power of two", align);
  if (align < gran) align = gran;
  const std::size_t size = (bytes + gran - 1) / gran * gran;
  GNIO_REQUIRE(size >= bytes && size + align > size,
               "host backend reserve: %zu bytes aligned to %zu overflows the address space", bytes,
               align);
  // Over-reserve by the alignment, then trim both ends: mmap only promises page alignment.
  const std::size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    fail_errno("host backend: reserving %zu bytes of address space failed; lower GNIO_HEAP_MAX",
               size);
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + align - 1) & ~(std::uintptr_t{align} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t end = start + span;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  try {
    std::lock_guard<std::mutex> lock(mu_);
    reservations_.emplace(aligned, size);
  } catch (...) {
    munmap(reinterpret_cast<void*>(aligned), size);
    throw;
  }
  GNIO_TRACE(Memory, "host backend: reserved %zu bytes at %p", size,
             reinterpret_cast<void*>(aligned));
  return reinterpret_cast<void*>(aligned);
}

void HostBackend::release(void* va, std::size_t bytes) {
  const std::size_t gran = granularity();
  const std::size_t size = (bytes + gran - 1) / gran * gran;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reservations_.find(reinterpret_cast<std::uintptr_t>(va));
    GNIO_REQUIRE(it != reservations_.end() && it->second == size,
                 "host backend release(%p, %zu): not a reservation made by reserve() on this "
                 "backend with that size",
                 va, bytes);
    reservations_.erase(it);
  }
  // munmap also drops any chunk still mapped inside; the chunks' memory lives on in their fds.
  if (munmap(va, size) != 0) fail_errno("host backend: munmap(%p, %zu) failed", va, size);
}

ShareableChunk HostBackend::create_chunk(std::size_t bytes) {
  const std::size_t gran = granularity();
  GNIO_REQUIRE(bytes > 0 && bytes % gran == 0,
               "host backend create_chunk: %zu bytes is not a positive multiple of the "
               "granularity (%zu)",
               bytes, gran);
  const int fd = memfd_create("gnio-chunk", MFD_CLOEXEC);
  if (fd < 0) fail_errno("host backend: memfd_create for a %zu-byte chunk failed", bytes);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    fail_errno("host backend: sizing a chunk to %zu bytes failed", bytes);
  }
  ShareableChunk chunk;
  chunk.fd = fd;
  chunk.bytes = bytes;
  return chunk;
}

void HostBackend::check_in_reservation(const char* op, const void* at, std::size_t bytes) {
  const std::size_t gran = granularity();
  const auto addr = reinterpret_cast<std::uintptr_t>(at);
  GNIO_REQUIRE(addr % gran == 0 && bytes > 0 && bytes % gran == 0,
               "host backend %s(%p, %zu): address and size must be positive multiples of the "
               "granularity (%zu)",
               op, at, bytes, gran);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reservations_.upper_bound(addr);
  const bool inside = it != reservations_.begin() &&
                      (--it, addr >= it->first && addr - it->first + bytes <= it->second);
  // MAP_FIXED replaces whatever is there; outside a reservation that could be the malloc heap.
  GNIO_REQUIRE(inside,
               "host backend %s(%p, %zu): the range is not inside a reservation made by "
               "reserve() on this backend",
               op, at, bytes);
}

void HostBackend::map_chunk(void* at, std::size_t bytes, int fd, bool /*own*/) {
  GNIO_REQUIRE(fd >= 0, "host backend map_chunk: invalid file descriptor %d", fd);
  check_in_reservation("map_chunk", at, bytes);
  // Mapping past the end of the file would only fail later, as SIGBUS on first touch.
  struct stat st;
  if (fstat(fd, &st) != 0) fail_errno("host backend map_chunk: fstat(fd %d) failed", fd);
  GNIO_REQUIRE(static_cast<std::size_t>(st.st_size) >= bytes,
               "host backend map_chunk: fd %d holds %lld bytes, fewer than the %zu to map", fd,
               static_cast<long long>(st.st_size), bytes);
  void* p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED)
    fail_errno("host backend: mapping fd %d at %p (%zu bytes) failed", fd, at, bytes);
  GNIO_ASSERT(p == at);
}

void HostBackend::unmap_chunk(void* at, std::size_t bytes) {
  check_in_reservation("unmap_chunk", at, bytes);
  // Replacing the mapping in one mmap (instead of munmap + mmap) never leaves a hole another
  // thread's mmap could land in.
  void* p =
      mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) fail_errno("host backend: unmapping %p (%zu bytes) failed", at, bytes);
}

void HostBackend::close_chunk(ShareableChunk& chunk) {
  if (chunk.fd >= 0 && close(chunk.fd) != 0)
    GNIO_WARN(Memory, "host backend: closing chunk fd %d failed: %s", chunk.fd,
              std::strerror(errno));
  chunk = ShareableChunk();
}

bool HostBackend::chunks_shareable(std::string*) const {
  return true;
}

IpcAllocation HostBackend::ipc_alloc(std::size_t bytes) {
  fail(ErrorClass::Unsupported,
       "ipc_alloc(%zu bytes): the host backend has no CUDA IPC handles; its heap is memfd chunks",
       bytes);
}

void* HostBackend::ipc_open(const IpcHandle&) {
  fail(ErrorClass::Unsupported,
       "ipc_open: the host backend has no CUDA IPC handles; its heap is memfd chunks");
}

void HostBackend::ipc_close(void* peer_ptr) noexcept {
  GNIO_WARN(Memory, "host backend: ipc_close(%p) of nothing ipc_open() returned; ignored",
            peer_ptr);
}

void HostBackend::ipc_free(void* ptr) noexcept {
  GNIO_WARN(Memory, "host backend: ipc_free(%p) of nothing ipc_alloc() returned; ignored", ptr);
}

ExportedBuffer HostBackend::export_buffer(const void* ptr, std::size_t bytes) {
  GNIO_REQUIRE(ptr && bytes > 0, "register_buffer: null pointer or 0 bytes (%p, %zu bytes)", ptr,
               bytes);
  const std::optional<HostShareableRange> r = host_backend_find_shareable(ptr);
  GNIO_REQUIRE(r.has_value(),
               "register_buffer(%p, %zu bytes): on the host backend only memory from "
               "Comm::alloc_device() can be registered (it lives in a memfd that node peers can "
               "map); this address is not inside a live alloc_device() allocation",
               ptr, bytes);
  const auto start = reinterpret_cast<std::uintptr_t>(ptr);
  const auto base = reinterpret_cast<std::uintptr_t>(r->base);
  GNIO_REQUIRE(start - base <= r->size && bytes <= r->size - (start - base),
               "register_buffer(%p, %zu bytes): the range runs past the end of its alloc_device() "
               "allocation (%p, %zu bytes); register a range inside one allocation",
               ptr, bytes, r->base, r->size);
  // Peers map whole pages: the ones covering the range, at their file offsets in the arena.
  const std::size_t page = granularity();
  const std::size_t file_start = r->offset + (start - base);
  const std::size_t map_from = file_start / page * page;
  const std::size_t map_to = (file_start + bytes + page - 1) / page * page;
  ExportedBuffer e;
  e.desc.kind = BufferShareKind::HostMemfd;
  e.desc.map_offset = map_from;
  e.desc.map_bytes = map_to - map_from;
  e.desc.ptr_offset = file_start - map_from;
  e.fd = r->fd;
  e.owns_fd = false;
  return e;
}

void HostBackend::release_export(ExportedBuffer& e) noexcept {
  if (e.owns_fd && e.fd >= 0) close(e.fd);
  e = ExportedBuffer();
}

ImportedBuffer HostBackend::import_buffer(const BufferExport& desc, int fd) {
  GNIO_REQUIRE(desc.kind == BufferShareKind::HostMemfd,
               "host backend import_buffer: a peer exported kind %u memory, not host-backend "
               "memory (do all node ranks use the host backend?)",
               static_cast<unsigned>(desc.kind));
  GNIO_REQUIRE(fd >= 0 && desc.map_bytes > 0 && desc.ptr_offset < desc.map_bytes,
               "host backend import_buffer: bad description (fd %d, %llu bytes)", fd,
               static_cast<unsigned long long>(desc.map_bytes));
  void* p = mmap(nullptr, desc.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(desc.map_offset));
  if (p == MAP_FAILED)
    fail_errno(
        "host backend: mapping a node peer's registered buffer (fd %d, offset %llu, %llu "
        "bytes) failed",
        fd, static_cast<unsigned long long>(desc.map_offset),
        static_cast<unsigned long long>(desc.map_bytes));
  ImportedBuffer b;
  b.kind = BufferShareKind::HostMemfd;
  b.mapping = p;
  b.mapping_bytes = desc.map_bytes;
  b.ptr = static_cast<char*>(p) + desc.ptr_offset;
  return b;
}

void HostBackend::release_import(ImportedBuffer& b) noexcept {
  if (b.mapping && munmap(b.mapping, b.mapping_bytes) != 0)
    GNIO_WARN(Memory, "host backend: unmapping a peer's registered buffer at %p failed: %s",
              b.mapping, std::strerror(errno));
  b = ImportedBuffer();
}

void* HostBackend::alloc_host_mapped(std::size_t bytes) {
  return host::mapped_alloc(bytes);
}
void HostBackend::free_host_mapped(void* p) noexcept {
  host::mapped_free(p);
}

void* HostBackend::alloc_device(std::size_t bytes) {
  return host::device_alloc(bytes);
}
void HostBackend::free_device(void* p) noexcept {
  host::device_free(p);
}

void HostBackend::create_stream(CUstream_st** cuda, detail::HostStream** host) {
  GNIO_REQUIRE(host != nullptr, "host backend create_stream: no place for the host stream");
  auto stream = std::make_shared<detail::HostStream>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.emplace(stream.get(), stream);
  }
  if (cuda) *cuda = nullptr;
  *host = stream.get();
}

void HostBackend::destroy_stream(CUstream_st* /*cuda*/, detail::HostStream* host) noexcept {
  if (!host) return;
  std::shared_ptr<detail::HostStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(host);
    if (it != streams_.end()) {
      stream = std::move(it->second);
      streams_.erase(it);
    }
  }
  if (!stream) {
    GNIO_WARN(Device, "host backend destroy_stream(%p): not a live stream of this backend",
              static_cast<void*>(host));
    return;
  }
  // Drain outside the lock: the queue may hold long kernels.
  stream->shutdown();
}

detail::HostStream* HostBackend::host_stream(StreamRef s, const char* op) {
  GNIO_REQUIRE(s.is_host(),
               "%s: a CUDA stream was given to the host backend; use a gnio::Stream created on "
               "this communicator",
               op);
  return s.host();
}

bool HostBackend::stream_idle(StreamRef s) {
  return host_stream(s, "stream_idle")->idle();
}

bool HostBackend::stream_wait_idle(StreamRef s, std::chrono::microseconds at_most) {
  return host_stream(s, "stream_wait_idle")->wait_idle(at_most);
}

void HostBackend::stream_synchronize(StreamRef s) {
  host_stream(s, "stream_synchronize")->synchronize();
}

void HostBackend::copy(void* dst, const void* src, std::size_t n, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "copy");
  if (n == 0) return;
  GNIO_REQUIRE(dst && src, "host backend copy of %zu bytes: null %s pointer", n,
               dst ? "source" : "destination");
  // memmove: a copy between overlapping ranges is a caller bug on the GPU, but costs nothing to
  // make harmless here.
  stream->enqueue_function([dst, src, n] { std::memmove(dst, src, n); }, "copy");
}

void HostBackend::fill(void* dst, int value, std::size_t n, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "fill");
  if (n == 0) return;
  GNIO_REQUIRE(dst, "host backend fill of %zu bytes: null destination", n);
  stream->enqueue_function([dst, value, n] { std::memset(dst, value, n); }, "fill");
}

void HostBackend::word_atomic(void* word, unsigned width, WordOp op, std::uint64_t operand,
                              std::uint64_t expected, std::uint64_t* old, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "word_atomic");
  GNIO_REQUIRE(
      word && (width == 4 || width == 8) && reinterpret_cast<std::uintptr_t>(word) % width == 0,
      "host backend word_atomic: %p is not an aligned %u-byte word", word, width);
  stream->enqueue_function(
      [=] {
        const std::uint64_t v =
            apply_word_op(word, width, op, operand, expected, dev::Order::AcqRel);
        if (old) dev::atomic_store(old, v, dev::Order::Release);
      },
      "word_atomic");
}

void HostBackend::register_host(void*, std::size_t) {}

void HostBackend::unregister_host(void*) noexcept {}

void HostBackend::deliver(const Delivery& d, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "deliver");
  GNIO_REQUIRE(well_formed(d),
               "host backend deliver: bad delivery (%zu bytes %p -> %p, signal word %p, mark "
               "word %p)",
               d.bytes, d.src, d.dst, static_cast<void*>(d.word), static_cast<void*>(d.done));
  stream->enqueue_function(
      [d] {
        if (d.bytes) std::memcpy(d.dst, d.src, d.bytes);
        if (d.word) (void)apply_word_op(d.word, 8, d.op, d.operand, 0, dev::Order::AcqRel);
        if (d.done) dev::atomic_store(d.done, d.mark, dev::Order::Release);
      },
      "deliver");
}

void HostBackend::deliver_batch(const Delivery* d, std::size_t count, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "deliver_batch");
  require_deliverable_batch(d, count, "host backend deliver_batch");
  // The same phases as the cuda backend's kernel: data, signals in order, marks.
  stream->enqueue_function(
      [batch = std::vector<Delivery>(d, d + count)] {
        for (const Delivery& x : batch)
          if (x.bytes) std::memcpy(x.dst, x.src, x.bytes);
        apply_signals_after_data(batch.data(), static_cast<std::uint32_t>(batch.size()));
        for (const Delivery& x : batch)
          if (x.done) dev::atomic_store(x.done, x.mark, dev::Order::Release);
      },
      "deliver_batch");
}

void HostBackend::start_delivery_agent(DeliveryRing* ring, AgentScratch* scratch, StreamRef s) {
  detail::HostStream* stream = host_stream(s, "start_delivery_agent");
  GNIO_REQUIRE(ring && scratch, "host backend start_delivery_agent: no ring or no scratch");
  // The stream's own thread is the agent: one thread, whose barrier is a no-op.
  stream->enqueue_function(
      [ring, scratch] {
        run_delivery_agent(
            ring, 0, 1, [] {}, scratch);
      },
      "delivery agent");
}

void HostBackend::device_synchronize() {
  std::vector<std::shared_ptr<detail::HostStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.reserve(streams_.size());
    for (auto& [raw, stream] : streams_) streams.push_back(stream);
  }
  // Every stream is waited for even after one failed: the caller expects all work to be over.
  std::exception_ptr first;
  for (auto& stream : streams) {
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      if (!first)
        first = std::current_exception();
      else
        GNIO_WARN(Device, "device_synchronize: another stream also failed: %s", e.what());
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::unique_ptr<Backend> make_host_backend() {
  return std::make_unique<HostBackend>();
}

}  // namespace gnio::platform
