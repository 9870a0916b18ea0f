// Host-backend memory: reservations, memfd chunks mapped at fixed addresses (also by another
// process that received the fd over a Unix socket), unmap keeping the reservation, the
// device-memory arena and its shareable-range registry, and host-mapped memory.
//
// The two-process cases fork a child that plays the peer rank. The child never returns into
// GoogleTest: it runs the same checks as the parent, prints what went wrong and reports a count
// through its exit status.
#include "platform/host/host_memory.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/scm_rights.hpp"
#include "host_test_util.hpp"
#include "platform/backend.hpp"

namespace {

using gnio::ErrorClass;
using gnio_host_test::error_class_of;

/// A 64-bit word that depends on who wrote it, where, and why; never zero.
std::uint64_t pattern(int rank, std::size_t i, unsigned salt = 0) {
  std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= static_cast<std::uint64_t>(salt + 7) * 0x94D049BB133111EBull;
  return h | 1;
}

/// Permissions ("rw-s", "---p", ...) of the mapping that contains `p`, or "" if none does.
std::string mapping_perms(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    const auto dash = range.find('-');
    const auto lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const auto hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (addr >= lo && addr < hi) return perms;
  }
  return "";
}

/// True when something (a reservation, a mapping) occupies the page at `p`.
bool address_taken(void* p, std::size_t bytes) {
  void* q = mmap(p, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == MAP_FAILED) return errno == EEXIST;
  munmap(q, bytes);
  return q != p ? true : false;  // old kernels ignore the flag and map elsewhere: inconclusive
}

// ---- a peer process on the other end of a socketpair -------------------------------------------

constexpr int kIoTimeoutMs = 20000;

/// Sends `msg` and, when fd >= 0, the descriptor with it (SCM_RIGHTS).
bool send_msg(int sock, const void* msg, std::size_t len, int fd = -1) {
  const gnio::bootstrap::ScmRightsMessage m(msg, len, fd);
  return sendmsg(sock, m.header(), MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

/// Receives exactly `len` bytes (one message) and the descriptor sent with it, if any (else -1).
/// Bounded: gives up after kIoTimeoutMs so a crashed peer fails the test instead of hanging it.
bool recv_msg(int sock, void* msg, std::size_t len, int* fd = nullptr) {
  pollfd pfd{sock, POLLIN, 0};
  if (poll(&pfd, 1, kIoTimeoutMs) != 1) return false;
  iovec iov{msg, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(len)) return false;
  if (fd) {
    *fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

/// Exchanges a one-byte token: both sides have reached the same step.
bool handshake(int sock, char step) {
  char got = 0;
  return send_msg(sock, &step, 1) && recv_msg(sock, &got, 1) && got == step;
}

/// Counts failed checks of one rank and says what the first few were (on stderr: the child has no
/// GoogleTest to report through).
struct Checker {
  const char* who;
  int failures = 0;
  bool operator()(bool ok, const char* what) {
    if (!ok && ++failures <= 5) std::fprintf(stderr, "[%s] check failed: %s\n", who, what);
    return ok;
  }
};

/// Forks a child that runs `body(socket)` and exits with its return value (capped at 100; 101 for
/// an exception). Returns the child's pid; the parent's end of the socketpair goes to `*sock`.
template <class F>
pid_t fork_peer(int* sock, F body) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    int rc = 101;
    try {
      rc = body(sv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[child] exception: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(rc > 100 ? 100 : rc);
  }
  close(sv[1]);
  *sock = sv[0];
  return pid;
}

/// The child's exit status (its failure count); kills it and returns -1 if it does not finish.
int wait_peer(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

// ---- single process
// ------------------------------------------------------------------------------

TEST(HostMemory, GranularityIsThePageSize) {
  auto be = gnio::platform::make_host_backend();
  EXPECT_EQ(be->granularity(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(HostMemory, ReservationIsAlignedAddressSpaceOnly) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  constexpr std::size_t kAlign = std::size_t{1} << 21;
  void* va = be->reserve(5 * page + 1, kAlign);  // rounded up to 6 pages
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(va) % kAlign, 0u);
  EXPECT_EQ(mapping_perms(va), "---p");
  EXPECT_EQ(mapping_perms(static_cast<char*>(va) + 5 * page), "---p");
  // A wrong size is refused and leaves the reservation in place.
  EXPECT_EQ(error_class_of([&] { be->release(va, 2 * page); }), ErrorClass::InvalidArgument);
  EXPECT_EQ(mapping_perms(va), "---p");
  EXPECT_EQ(error_class_of([&] { be->reserve(0, 0); }), ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { be->reserve(page, 3 * page); }), ErrorClass::InvalidArgument);
  be->release(va, 5 * page + 1);
}

TEST(HostMemory, ChunkMappedTwiceAliasesAndUnmapKeepsTheReservation) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  const std::size_t bytes = 16 * page, stride = 32 * page;
  auto* base = static_cast<char*>(be->reserve(2 * stride, 0));
  gnio::platform::ShareableChunk chunk = be->create_chunk(bytes);
  ASSERT_GE(chunk.fd, 0);
  EXPECT_EQ(chunk.bytes, bytes);
  be->map_chunk(base, bytes, chunk.fd, true);
  be->map_chunk(base + stride, bytes, chunk.fd, false);
  EXPECT_EQ(mapping_perms(base), "rw-s");

  auto* a = reinterpret_cast<std::uint64_t*>(base);
  auto* b = reinterpret_cast<std::uint64_t*>(base + stride);
  const std::size_t words = bytes / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < words; ++i) a[i] = pattern(0, i);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < words; ++i) wrong += b[i] != pattern(0, i);
  EXPECT_EQ(wrong, 0u) << "#words not visible through the second mapping";

  be->unmap_chunk(base + stride, bytes);
  EXPECT_EQ(mapping_perms(base + stride), "---p");
  EXPECT_EQ(mapping_perms(base + stride + bytes - 1), "---p");
  EXPECT_TRUE(address_taken(base + stride, page)) << "unmap_chunk gave the reservation away";
  EXPECT_EQ(a[words - 1], pattern(0, words - 1)) << "unmapping one view disturbed the other";

  // The memory lives in the fd: mapping it again shows the same data.
  be->map_chunk(base + stride, bytes, chunk.fd, false);
  wrong = 0;
  for (std::size_t i = 0; i < words; ++i) wrong += b[i] != pattern(0, i);
  EXPECT_EQ(wrong, 0u);

  be->unmap_chunk(base, bytes);
  be->unmap_chunk(base + stride, bytes);
  be->close_chunk(chunk);
  EXPECT_EQ(chunk.fd, -1);
  be->release(base, 2 * stride);
}

TEST(HostMemory, BadChunkArgumentsAreInvalidArgument) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  auto* base = static_cast<char*>(be->reserve(8 * page, 0));
  gnio::platform::ShareableChunk chunk = be->create_chunk(2 * page);
  EXPECT_EQ(error_class_of([&] { be->create_chunk(0); }), ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { be->create_chunk(page + 1); }), ErrorClass::InvalidArgument);
  // Outside any reservation (MAP_FIXED there could clobber the malloc heap).
  std::vector<char> heap(4 * page);
  char* outside = reinterpret_cast<char*>(
      (reinterpret_cast<std::uintptr_t>(heap.data()) + page - 1) & ~(std::uintptr_t{page} - 1));
  EXPECT_EQ(error_class_of([&] { be->map_chunk(outside, page, chunk.fd, true); }),
            ErrorClass::InvalidArgument);
  // Running past the end of the reservation.
  EXPECT_EQ(error_class_of([&] { be->map_chunk(base + 7 * page, 2 * page, chunk.fd, true); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { be->map_chunk(base + 1, page, chunk.fd, true); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { be->map_chunk(base, 3 * page, chunk.fd, true); }),
            ErrorClass::InvalidArgument)
      << "mapping more than the fd holds must fail now, not as SIGBUS later";
  EXPECT_EQ(error_class_of([&] { be->map_chunk(base, page, -1, true); }),
            ErrorClass::InvalidArgument);
  EXPECT_EQ(error_class_of([&] { be->unmap_chunk(outside, page); }), ErrorClass::InvalidArgument);
  EXPECT_EQ(mapping_perms(base), "---p") << "a refused call changed the reservation";
  be->close_chunk(chunk);
  be->release(base, 8 * page);
}

// The heap's CUDA IPC layout asks the backend, not the cuda backend's type: the host backend says
// its chunks are always shareable and refuses IPC handles as Unsupported.
TEST(HostMemory, ChunksAreShareableAndIpcHandlesUnsupported) {
  auto be = gnio::platform::make_host_backend();
  std::string why = "untouched";
  EXPECT_TRUE(be->chunks_shareable(&why));
  EXPECT_EQ(why, "untouched");
  EXPECT_EQ(error_class_of([&] { be->ipc_alloc(be->granularity()); }), ErrorClass::Unsupported);
  EXPECT_EQ(error_class_of([&] { be->ipc_open(gnio::platform::IpcHandle{}); }),
            ErrorClass::Unsupported);
}

TEST(HostMemory, DeviceAllocationsAreZeroedAlignedAndFoundByTheRegistry) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  EXPECT_EQ(be->alloc_device(0), nullptr);
  const std::size_t sizes[] = {1, page, 3 * page + 100, 1 << 20};
  std::vector<char*> ptrs;
  for (std::size_t n : sizes) {
    auto* p = static_cast<char*>(be->alloc_device(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % page, 0u);
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < n; ++i) nonzero += p[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "#non-zero bytes in a fresh allocation of " << n;
    std::memset(p, 0x6B, n);
    ptrs.push_back(p);
  }
  auto first = gnio::platform::host_backend_find_shareable(ptrs[0]);
  ASSERT_TRUE(first.has_value());
  for (std::size_t k = 0; k < ptrs.size(); ++k) {
    const std::size_t rounded = (sizes[k] + page - 1) / page * page;
    for (std::size_t at : {std::size_t{0}, sizes[k] / 2, sizes[k] - 1}) {
      auto r = gnio::platform::host_backend_find_shareable(ptrs[k] + at);
      ASSERT_TRUE(r.has_value()) << "allocation " << k << " offset " << at;
      EXPECT_EQ(r->base, ptrs[k]);
      EXPECT_EQ(r->size, rounded);
      EXPECT_EQ(r->fd, first->fd) << "one arena, one fd";
      EXPECT_EQ(r->offset % page, 0u);
      // Offsets and addresses move together: the arena is one contiguous mapping of the fd.
      EXPECT_EQ(static_cast<std::ptrdiff_t>(r->offset - first->offset), ptrs[k] - ptrs[0]);
    }
  }
  int on_stack = 0;
  EXPECT_FALSE(gnio::platform::host_backend_find_shareable(&on_stack).has_value());

  be->free_device(ptrs[2]);
  EXPECT_FALSE(gnio::platform::host_backend_find_shareable(ptrs[2]).has_value());
  EXPECT_FALSE(gnio::platform::host_backend_find_shareable(ptrs[2] + page).has_value());
  // The freed range comes back zeroed (its pages were returned to the system).
  auto* again = static_cast<char*>(be->alloc_device(3 * page));
  ASSERT_EQ(again, ptrs[2]) << "first fit reuses the freed range";
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < 3 * page; ++i) nonzero += again[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  be->free_device(&on_stack);  // logged and ignored
  be->free_device(nullptr);
  be->free_device(again);
  for (std::size_t k : {0, 1, 3}) be->free_device(ptrs[k]);
}

// ---- two processes ------------------------------------------------------------------------------

/// One rank of the chunk exchange: maps its own chunk at base + rank * stride and the peer's (fd
/// received over `sock`) at base + peer * stride, then both check each other's writes both ways.
/// Returns the number of failed checks.
int exchange_chunks(int rank, int sock) {
  Checker check{rank == 0 ? "parent" : "child"};
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  const std::size_t bytes = 8 * page, stride = 64 * page;
  const int peer = 1 - rank;
  auto* base = static_cast<char*>(be->reserve(2 * stride, std::size_t{1} << 21));
  gnio::platform::ShareableChunk mine = be->create_chunk(bytes);
  const std::uint64_t my_bytes = bytes;
  std::uint64_t peer_bytes = 0;
  int peer_fd = -1;
  if (!check(send_msg(sock, &my_bytes, sizeof my_bytes, mine.fd), "send fd")) return check.failures;
  if (!check(recv_msg(sock, &peer_bytes, sizeof peer_bytes, &peer_fd) && peer_fd >= 0, "recv fd"))
    return check.failures;
  check(peer_fd != mine.fd || rank == 1, "received a fresh descriptor");
  be->map_chunk(base + rank * stride, bytes, mine.fd, true);
  be->map_chunk(base + peer * stride, peer_bytes, peer_fd, false);

  auto* own = reinterpret_cast<std::uint64_t*>(base + rank * stride);
  auto* theirs = reinterpret_cast<std::uint64_t*>(base + peer * stride);
  const std::size_t half = bytes / sizeof(std::uint64_t) / 2;
  for (std::size_t i = 0; i < half; ++i) own[i] = pattern(rank, i);
  check(handshake(sock, 'w'), "handshake after writing");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < half; ++i) wrong += theirs[i] != pattern(peer, i);
  check(wrong == 0, "peer's writes to its own chunk visible through my mapping");
  // Write into the peer's chunk (a "put"); the peer checks it in its own mapping.
  for (std::size_t i = 0; i < half; ++i) theirs[half + i] = pattern(rank, i, 1);
  check(handshake(sock, 'p'), "handshake after putting");
  wrong = 0;
  for (std::size_t i = 0; i < half; ++i) wrong += own[half + i] != pattern(peer, i, 1);
  check(wrong == 0, "peer's puts into my chunk visible");

  // Unmapping the peer keeps the reservation; mapping again shows the same memory.
  be->unmap_chunk(base + peer * stride, peer_bytes);
  check(mapping_perms(theirs) == "---p", "unmapped range is PROT_NONE");
  check(address_taken(theirs, page), "unmapped range still reserved");
  be->map_chunk(base + peer * stride, peer_bytes, peer_fd, false);
  check(theirs[0] == pattern(peer, 0) && theirs[half] == pattern(rank, 0, 1), "remapped data");
  check(handshake(sock, 'd'), "handshake before teardown");

  be->unmap_chunk(base + peer * stride, peer_bytes);
  be->unmap_chunk(base + rank * stride, bytes);
  close(peer_fd);
  be->close_chunk(mine);
  be->release(base, 2 * stride);
  return check.failures;
}

TEST(HostMemoryTwoProcesses, ChunksMapAtFlatAddressesAndSeeEachOthersWrites) {
  int sock = -1;
  const pid_t pid = fork_peer(&sock, [](int s) { return exchange_chunks(1, s); });
  ASSERT_GT(pid, 0);
  EXPECT_EQ(exchange_chunks(0, sock), 0) << "parent's checks (details on stderr)";
  close(sock);
  EXPECT_EQ(wait_peer(pid), 0) << "child's failed checks (details on stderr)";
}

/// What the parent tells the child about a device allocation it shares.
struct SharedRange {
  std::uint64_t offset, size, words;
};

// A buffer from alloc_device is shared with another process through the registry: the fd and
// offset the registry gives are enough for the peer to map it and exchange data both ways.
TEST(HostMemoryTwoProcesses, DeviceAllocationIsShareableThroughTheRegistry) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  const std::size_t n = 5 * page + 40;
  auto* buf = static_cast<std::uint64_t*>(be->alloc_device(n));
  const std::size_t words = n / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < words; ++i) buf[i] = pattern(0, i);
  auto range = gnio::platform::host_backend_find_shareable(buf + 17);
  ASSERT_TRUE(range.has_value());
  ASSERT_EQ(range->base, buf);

  int sock = -1;
  const pid_t pid = fork_peer(&sock, [](int s) {
    Checker check{"child"};
    SharedRange r{};
    int fd = -1;
    if (!check(recv_msg(s, &r, sizeof r, &fd) && fd >= 0, "recv fd")) return check.failures;
    void* p =
        mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(r.offset));
    if (!check(p != MAP_FAILED, "mmap the shared range")) return check.failures;
    auto* q = static_cast<std::uint64_t*>(p);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < r.words; ++i) wrong += q[i] != pattern(0, i);
    check(wrong == 0, "parent's data visible through fd + offset");
    for (std::size_t i = 0; i < r.words; i += 3) q[i] = pattern(1, i);
    check(handshake(s, 'r'), "handshake");
    return check.failures;
  });
  ASSERT_GT(pid, 0);
  const SharedRange msg{range->offset, range->size, words};
  ASSERT_TRUE(send_msg(sock, &msg, sizeof msg, range->fd));
  EXPECT_TRUE(handshake(sock, 'r'));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < words; ++i)
    wrong += buf[i] != (i % 3 ? pattern(0, i) : pattern(1, i));
  EXPECT_EQ(wrong, 0u) << "#words of the child's writes not visible in the parent's buffer";
  close(sock);
  EXPECT_EQ(wait_peer(pid), 0);
  be->free_device(buf);
}

// A forked child must not allocate from the parent's arena (they would hand out the same pages):
// it gets a fresh arena of its own, sized by its own environment.
TEST(HostMemoryTwoProcesses, ForkedChildAllocatesFromItsOwnArena) {
  auto be = gnio::platform::make_host_backend();
  auto* mine = static_cast<std::uint64_t*>(be->alloc_device(4096));
  for (std::size_t i = 0; i < 512; ++i) mine[i] = pattern(0, i, 3);
  const int parent_fd = gnio::platform::host_backend_find_shareable(mine)->fd;
  int sock = -1;
  const pid_t pid = fork_peer(&sock, [&](int) {
    Checker check{"child"};
    check(!gnio::platform::host_backend_find_shareable(mine).has_value(),
          "the parent's allocations are not in the child's registry");
    setenv("GNIO_HOST_DEVICE_MEM", "1M", 1);
    auto* p = static_cast<std::uint64_t*>(be->alloc_device(4096));
    auto r = gnio::platform::host_backend_find_shareable(p);
    check(r.has_value() && r->fd != parent_fd, "a new arena with its own memfd");
    for (std::size_t i = 0; i < 512; ++i) p[i] = ~0ull;
    check(error_class_of([&] { be->alloc_device(2 << 20); }) == ErrorClass::SystemError,
          "exhausting a 1 MiB arena is SystemError");
    return check.failures;
  });
  ASSERT_GT(pid, 0);
  close(sock);
  EXPECT_EQ(wait_peer(pid), 0);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < 512; ++i) wrong += mine[i] != pattern(0, i, 3);
  EXPECT_EQ(wrong, 0u) << "the child's allocations landed in the parent's memory";
  be->free_device(mine);
}

// ---- host-mapped memory (last: it starts threads, and the tests above fork) --------------------

TEST(HostMappedMemory, IsZeroedAlignedAndSafeForAtomicsAcrossThreads) {
  auto be = gnio::platform::make_host_backend();
  const std::size_t page = be->granularity();
  EXPECT_EQ(be->alloc_host_mapped(0), nullptr);
  auto* p = static_cast<std::uint64_t*>(be->alloc_host_mapped(3 * page + 8));
  auto* other = static_cast<std::uint64_t*>(be->alloc_host_mapped(64));
  ASSERT_TRUE(p && other);
  EXPECT_NE(p, other);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % page, 0u);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < (3 * page + 8) / 8; ++i) nonzero += p[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  constexpr int kThreads = 4, kAdds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([p, t] {
      for (int i = 0; i < kAdds; ++i) {
        std::atomic_ref<std::uint64_t>(p[0]).fetch_add(1, std::memory_order_relaxed);
        std::atomic_ref<std::uint64_t>(p[1 + t]).store(i + 1, std::memory_order_release);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(p[0], std::uint64_t{kThreads} * kAdds);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(p[1 + t], static_cast<std::uint64_t>(kAdds));
  be->free_host_mapped(p);
  be->free_host_mapped(other);
  be->free_host_mapped(p);  // second free: logged and ignored
}

}  // namespace
