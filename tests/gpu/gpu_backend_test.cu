// GPU smoke test of the cuda platform backend on its own (no memory layer, no Comm): symmetric
// heap chunks shared between two processes through POSIX fds (SCM_RIGHTS) and mapped at
// base + rank * stride, the legacy CUDA IPC fallback, host-mapped memory, streams, and error
// reporting.
//
// Every test forks its ranks first and initialises CUDA only inside them (a process must not
// fork after CUDA initialisation), so the GoogleTest process itself never touches CUDA. A rank
// reports through its exit status: 0 = passed, kSkip = not enough GPUs, otherwise the number of
// failed checks; it explains every failure on stderr. Data checks are exact, on every element,
// on the device (mismatch counts) and again on the host.
#include <cudaTypedefs.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/scm_rights.hpp"
#include "gnio/error.hpp"
#include "platform/cuda/cuda_backend.hpp"
#include "platform/gpu_info.hpp"

namespace {

using gnio::Error;
using gnio::ErrorClass;
using gnio::platform::CudaBackend;

constexpr int kSkip = 77;           // exit status of a rank that cannot run (too few GPUs)
constexpr int kRankTimeoutS = 120;  // a rank that takes longer is killed and counted as failed
constexpr int kMessageTimeoutMs = 60000;  // bound on every wait for the peer

// ---- kernels -------------------------------------------------------------------------------

/// The value element `i` holds when written with `salt`: never zero for the sizes used here
/// (i * 3 stays far below 2^32), and different for every salt, so a read of the wrong rank's
/// memory, of stale memory or of zeros is caught.
__host__ __device__ inline std::uint32_t pattern(std::size_t i, std::uint32_t salt) {
  return static_cast<std::uint32_t>(i) * 3u + salt + 1u;
}

__global__ void write_pattern(std::uint32_t* p, std::size_t n, std::uint32_t salt) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = pattern(i, salt);
}

/// Counts elements that differ from pattern(i, salt) (or from 0 with `expect_zero`) into
/// `result[0]` and records the smallest wrong index in `result[1]` (initialised to ~0).
__global__ void count_mismatches(const std::uint32_t* p, std::size_t n, std::uint32_t salt,
                                 bool expect_zero, unsigned long long* result) {
  unsigned long long wrong = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::uint32_t expected = expect_zero ? 0u : pattern(i, salt);
    if (p[i] != expected) {
      ++wrong;
      atomicMin(&result[1], static_cast<unsigned long long>(i));
    }
  }
  if (wrong) atomicAdd(&result[0], wrong);
}

/// Spins for `ns` nanoseconds of the GPU's global timer: keeps a stream busy for a known time.
__global__ void spin_for(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

/// Stores through `p`: launched with an address nothing is mapped at, to fault on purpose.
__global__ void store_to(int* p) {
  *p = 1;
}

constexpr unsigned kGrid = 264;  // two blocks per SM of an H200; any size works
constexpr unsigned kBlock = 256;

// ---- per-rank checking ---------------------------------------------------------------------

/// Failure counting and reporting inside a rank (GoogleTest assertions do not cross fork()).
class Rank {
 public:
  Rank(int rank, int nranks, int sock) : rank_(rank), nranks_(nranks), sock_(sock) {}
  int rank() const { return rank_; }
  int peer() const { return nranks_ > 1 ? 1 - rank_ : rank_; }
  int sock() const { return sock_; }
  int failures() const { return failures_; }

  void say(const char* fmt, ...) const __attribute__((format(printf, 2, 3))) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "[rank %d] %s\n", rank_, text);
  }
  /// Counts a failure unless `ok`; the message says what was expected.
  bool check(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    if (ok) return true;
    ++failures_;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "[rank %d] FAILED: %s\n", rank_, text);
    return false;
  }
  /// Runs `f`, which must throw gnio::Error of class `cls` whose message contains `needle`.
  template <class F>
  void expect_error(ErrorClass cls, const char* needle, const char* what, F&& f) {
    try {
      f();
      check(false, "%s: expected Error(%s), nothing was thrown", what,
            std::string(gnio::to_string(cls)).c_str());
    } catch (const Error& e) {
      check(e.error_class() == cls && std::strstr(e.what(), needle),
            "%s: expected Error(%s) mentioning '%s', got: %s", what,
            std::string(gnio::to_string(cls)).c_str(), needle, e.what());
    }
  }

 private:
  int rank_, nranks_, sock_;
  int failures_ = 0;
};

// ---- messages between the two ranks (SOCK_SEQPACKET: one send = one message) ----------------

void wait_ready(int sock, short events) {
  pollfd pfd{sock, events, 0};
  int rc;
  do rc = ::poll(&pfd, 1, kMessageTimeoutMs);
  while (rc < 0 && errno == EINTR);
  if (rc == 0) throw std::runtime_error("peer did not answer within 60 s");
  if (rc < 0) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
}

/// Sends `bytes` and, with `fd` >= 0, the descriptor as SCM_RIGHTS ancillary data.
void send_message(int sock, const void* data, std::size_t bytes, int fd = -1) {
  const gnio::bootstrap::ScmRightsMessage msg(data, bytes, fd);
  wait_ready(sock, POLLOUT);
  if (::sendmsg(sock, msg.header(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes))
    throw std::runtime_error(std::string("sendmsg: ") + std::strerror(errno));
}

/// Receives exactly `bytes`; returns the descriptor that came with them, or -1.
int receive_message(int sock, void* data, std::size_t bytes) {
  iovec iov{data, bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  wait_ready(sock, POLLIN);
  ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (n == 0) throw std::runtime_error("peer closed the connection (did it fail?)");
  if (n != static_cast<ssize_t>(bytes) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    throw std::runtime_error("malformed message from the peer");
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

void send_fd(int sock, int fd) {
  const char tag = 'F';
  send_message(sock, &tag, 1, fd);
}

int receive_fd(int sock) {
  char tag = 0;
  int fd = receive_message(sock, &tag, 1);
  if (tag != 'F' || fd < 0) throw std::runtime_error("expected a file descriptor from the peer");
  return fd;
}

/// Both ranks arrive before either leaves.
void barrier(int sock) {
  const char tag = 'B';
  char got = 0;
  send_message(sock, &tag, 1);
  receive_message(sock, &got, 1);
  if (got != 'B') throw std::runtime_error("barrier: unexpected message from the peer");
}

// ---- running ranks -------------------------------------------------------------------------

/// Forks `nranks` processes running `body(rank)`, connected pairwise by a socketpair made
/// before the fork; waits for them (bounded) and returns their exit statuses (-1: killed after
/// the timeout, 128 + n: died of signal n).
std::vector<int> run_ranks(int nranks, const std::function<int(Rank&)>& body) {
  int sv[2] = {-1, -1};
  if (nranks == 2 && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << std::strerror(errno);
    return std::vector<int>(nranks, -1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(kRankTimeoutS + 10);  // never outlive the parent's patience
      int sock = nranks == 2 ? sv[r] : -1;
      if (nranks == 2) ::close(sv[1 - r]);
      Rank rank(r, nranks, sock);
      int status = 0;
      try {
        status = body(rank);
      } catch (const std::exception& e) {
        rank.check(false, "unexpected exception: %s", e.what());
        status = rank.failures();
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(status == kSkip ? kSkip : std::min(status, 100));
    }
    if (pid < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
    pids.push_back(pid);
  }
  if (nranks == 2) {
    ::close(sv[0]);
    ::close(sv[1]);
  }
  std::vector<int> statuses(nranks, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kRankTimeoutS);
  int left = 0;
  for (pid_t pid : pids) left += pid > 0;
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (pids[r] <= 0) continue;
      int ws = 0;
      if (::waitpid(pids[r], &ws, WNOHANG) == pids[r]) {
        statuses[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        pids[r] = 0;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] <= 0) continue;
        ADD_FAILURE() << "rank " << r << " did not finish within " << kRankTimeoutS
                      << " s; killing it";
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        pids[r] = 0;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return statuses;
}

/// Runs the ranks; GTEST_SKIPs when one lacks GPUs, fails for every rank that did not pass.
#define RUN_RANKS(nranks, body)                                                                \
  do {                                                                                         \
    const std::vector<int> statuses_ = run_ranks(nranks, body);                                \
    for (int s_ : statuses_)                                                                   \
      if (s_ == kSkip) GTEST_SKIP() << "needs " << (nranks) << " GPU(s); see the rank output"; \
    for (std::size_t r_ = 0; r_ < statuses_.size(); ++r_)                                      \
      EXPECT_EQ(statuses_[r_], 0) << "rank " << r_ << " failed (exit status " << statuses_[r_] \
                                  << "; 128+n = signal n, -1 = timeout); its output is above"; \
  } while (0)

/// True when this process sees at least `n` GPUs; otherwise says so.
bool have_gpus(Rank& rank, int n) {
  int count = gnio::platform::cuda_device_count();
  if (count >= n) return true;
  rank.say("SKIP: this test needs %d GPU(s); cuda_device_count() = %d", n, count);
  return false;
}

// ---- helpers on the device -----------------------------------------------------------------

/// Device-side mismatch count of `n` elements at `p` against pattern(i, salt) (or zeros);
/// `result` is 2 words of device memory, `host` 2 words of host-mapped memory.
unsigned long long device_mismatches(CudaBackend& be, cudaStream_t s, const std::uint32_t* p,
                                     std::size_t n, std::uint32_t salt, bool expect_zero,
                                     unsigned long long* result, unsigned long long* host,
                                     unsigned long long* first_wrong) {
  be.fill(result, 0, sizeof(unsigned long long), s);
  be.fill(result + 1, 0xff, sizeof(unsigned long long), s);
  count_mismatches<<<kGrid, kBlock, 0, s>>>(p, n, salt, expect_zero, result);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw std::runtime_error(std::string("count_mismatches launch: ") + cudaGetErrorString(e));
  be.copy(host, result, 2 * sizeof(unsigned long long), s);
  be.stream_synchronize(s);
  *first_wrong = host[1];
  return host[0];
}

/// Host-side mismatch count of a copy of the elements.
std::size_t host_mismatches(const std::vector<std::uint32_t>& v, std::uint32_t salt,
                            std::size_t* first_wrong) {
  std::size_t wrong = 0;
  *first_wrong = ~std::size_t{0};
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != pattern(i, salt) && wrong++ == 0) *first_wrong = i;
  return wrong;
}

void launch_write(cudaStream_t s, std::uint32_t* p, std::size_t n, std::uint32_t salt) {
  write_pattern<<<kGrid, kBlock, 0, s>>>(p, n, salt);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw std::runtime_error(std::string("write_pattern launch: ") + cudaGetErrorString(e));
}

/// A backend, its stream and scratch words for mismatch counts, for one rank's test body.
struct Fixture {
  explicit Fixture(int device)
      : owner(gnio::platform::make_cuda_backend(device)), be(dynamic_cast<CudaBackend&>(*owner)) {
    CUstream_st* s = nullptr;
    // A non-null sentinel that create_stream must overwrite with nullptr.
    static char sentinel;
    auto* host = reinterpret_cast<gnio::detail::HostStream*>(&sentinel);
    be.create_stream(&s, &host);
    stream = s;
    host_stream_cleared = host == nullptr;
    result = static_cast<unsigned long long*>(be.alloc_device(2 * sizeof(unsigned long long)));
    result_host =
        static_cast<unsigned long long*>(be.alloc_host_mapped(2 * sizeof(unsigned long long)));
  }
  ~Fixture() {
    be.free_host_mapped(result_host);
    be.free_device(result);
    be.destroy_stream(stream, nullptr);
  }
  /// Mismatches of `n` elements at `p` (device or peer-mapped) against pattern(i, salt).
  unsigned long long wrong_on_device(const std::uint32_t* p, std::size_t n, std::uint32_t salt,
                                     unsigned long long* first, bool expect_zero = false) {
    return device_mismatches(be, stream, p, n, salt, expect_zero, result, result_host, first);
  }
  /// The same check after copying the elements to the host.
  std::size_t wrong_on_host(const std::uint32_t* p, std::size_t n, std::uint32_t salt,
                            std::size_t* first) {
    std::vector<std::uint32_t> copy(n);
    be.copy(copy.data(), p, n * sizeof(std::uint32_t), stream);
    be.stream_synchronize(stream);
    return host_mismatches(copy, salt, first);
  }

  std::unique_ptr<gnio::platform::Backend> owner;
  CudaBackend& be;
  cudaStream_t stream = nullptr;
  bool host_stream_cleared = false;
  unsigned long long* result = nullptr;
  unsigned long long* result_host = nullptr;
};

/// Checks `n` elements at `p` against pattern(i, salt) on the device and on the host.
void check_pattern(Rank& rank, Fixture& f, const std::uint32_t* p, std::size_t n,
                   std::uint32_t salt, const char* what) {
  unsigned long long first = 0;
  unsigned long long wrong = f.wrong_on_device(p, n, salt, &first);
  rank.check(wrong == 0, "%s: %llu of %zu elements wrong on the device (first at %llu)", what,
             wrong, n, first);
  std::size_t host_first = 0;
  std::size_t host_wrong = f.wrong_on_host(p, n, salt, &host_first);
  rank.check(host_wrong == 0, "%s: %zu of %zu elements wrong in the host copy (first at %zu)", what,
             host_wrong, n, host_first);
  if (wrong == 0 && host_wrong == 0) rank.say("%s: %zu elements exact", what, n);
}

// ---- test bodies ---------------------------------------------------------------------------

/// Two ranks, one GPU each: a heap of two chunks per rank mapped contiguously at
/// base + rank * stride, every rank's chunks mapped by both; reads and writes across NVLink.
int peer_mapped_heap(Rank& rank) {
  if (!have_gpus(rank, 2)) return kSkip;
  const int me = rank.rank(), peer = rank.peer();
  Fixture f(me);
  CudaBackend& be = f.be;
  rank.say("GPU %d: %s", me, be.describe().c_str());
  if (!rank.check(be.vmm_supported(), "CUDA VMM with POSIX fds unavailable: %s",
                  be.vmm_unsupported_reason().c_str()))
    return rank.failures();

  const std::size_t gran = be.granularity();
  // Chunks of an odd number of granules, two per rank, and a stride with unmapped room after
  // them: offsets, strides and chunk boundaries are all exercised.
  const std::size_t chunk = ((std::size_t{23} << 20) + gran - 1) / gran * gran;
  const std::size_t stride = 4 * chunk;
  char* base = static_cast<char*>(be.reserve(2 * stride, 0));
  rank.check(reinterpret_cast<std::uintptr_t>(base) % gran == 0,
             "reservation %p not aligned to %zu", static_cast<void*>(base), gran);

  gnio::platform::ShareableChunk a = be.create_chunk(chunk);
  gnio::platform::ShareableChunk b = be.create_chunk(chunk);
  send_fd(rank.sock(), a.fd);
  send_fd(rank.sock(), b.fd);
  const int peer_a = receive_fd(rank.sock());
  const int peer_b = receive_fd(rank.sock());

  char* mine = base + me * stride;
  char* theirs = base + peer * stride;
  be.map_chunk(mine, chunk, a.fd, true);
  // The second own chunk through a dup of its fd, as an fd exchange hands it back to its owner.
  const int b_dup = ::dup(b.fd);
  be.map_chunk(mine + chunk, chunk, b_dup, true);
  ::close(b_dup);
  be.map_chunk(theirs, chunk, peer_a, false);
  be.map_chunk(theirs + chunk, chunk, peer_b, false);
  ::close(peer_a);  // the mapping does not need the fds
  ::close(peer_b);

  auto* own_words = reinterpret_cast<std::uint32_t*>(mine);
  auto* peer_words = reinterpret_cast<std::uint32_t*>(theirs);
  const std::size_t n = 2 * chunk / sizeof(std::uint32_t);  // across both chunks
  const std::size_t half = n / 2;                           // chunk b starts here

  unsigned long long first = 0;
  unsigned long long nonzero = f.wrong_on_device(own_words, n, 0, &first, /*expect_zero=*/true);
  rank.check(nonzero == 0, "new chunks: %llu of %zu elements are not zero (first at %llu)", nonzero,
             n, first);

  // 1. Each rank writes its own heap; the peer reads it through its mapping.
  launch_write(f.stream, own_words, n, static_cast<std::uint32_t>(me));
  be.stream_synchronize(f.stream);
  barrier(rank.sock());
  check_pattern(rank, f, peer_words, n, static_cast<std::uint32_t>(peer),
                "read of the peer's heap");
  barrier(rank.sock());

  // 2. Each rank writes into the peer's second chunk (remote stores); the owner checks both.
  const std::uint32_t remote_salt = 100u + static_cast<std::uint32_t>(me);
  launch_write(f.stream, peer_words + half, n - half, remote_salt);
  be.stream_synchronize(f.stream);
  barrier(rank.sock());
  check_pattern(rank, f, own_words, half, static_cast<std::uint32_t>(me),
                "own first chunk after the peer's remote writes");
  check_pattern(rank, f, own_words + half, n - half, 100u + static_cast<std::uint32_t>(peer),
                "own second chunk written by the peer");
  barrier(rank.sock());

  // 3. Bad requests are refused with no effect.
  rank.expect_error(ErrorClass::InvalidArgument, "still mapped", "release before unmap",
                    [&] { be.release(base, 2 * stride); });
  rank.expect_error(ErrorClass::InvalidArgument, "still mapped", "close_chunk while mapped",
                    [&] { be.close_chunk(a); });
  rank.expect_error(ErrorClass::InvalidArgument, "no mapping", "unmap with a wrong size",
                    [&] { be.unmap_chunk(mine, gran); });
  rank.expect_error(ErrorClass::InvalidArgument, "overlaps", "map over a mapping",
                    [&] { be.map_chunk(mine, chunk, a.fd, true); });
  rank.expect_error(ErrorClass::InvalidArgument, "not inside a reservation",
                    "map outside the reservation",
                    [&] { be.map_chunk(base + 2 * stride, chunk, a.fd, true); });
  rank.expect_error(ErrorClass::InvalidArgument, "multiple of the granularity",
                    "chunk of a partial granule", [&] { be.create_chunk(gran + gran / 2); });

  // 4. Teardown in the order the memory layer uses.
  be.unmap_chunk(theirs + chunk, chunk);
  be.unmap_chunk(theirs, chunk);
  be.unmap_chunk(mine + chunk, chunk);
  be.unmap_chunk(mine, chunk);
  be.close_chunk(a);
  be.close_chunk(b);
  rank.check(a.fd == -1 && a.handle == 0, "close_chunk did not reset the chunk");
  be.release(base, 2 * stride);
  barrier(rank.sock());
  return rank.failures();
}

/// Two ranks: device memory shared through legacy CUDA IPC handles.
int ipc_fallback(Rank& rank) {
  if (!have_gpus(rank, 2)) return kSkip;
  const int me = rank.rank(), peer = rank.peer();
  Fixture f(me);
  CudaBackend& be = f.be;
  const std::size_t bytes = (std::size_t{6} << 20) + 3 * 4096;  // not a round size
  const std::size_t n = bytes / sizeof(std::uint32_t);
  gnio::platform::IpcAllocation mine = be.ipc_alloc(bytes);
  unsigned long long first = 0;
  unsigned long long nonzero =
      f.wrong_on_device(static_cast<std::uint32_t*>(mine.ptr), n, 0, &first, true);
  rank.check(nonzero == 0, "ipc_alloc: %llu of %zu elements not zero", nonzero, n);
  launch_write(f.stream, static_cast<std::uint32_t*>(mine.ptr), n, 10u + me);
  be.stream_synchronize(f.stream);

  send_message(rank.sock(), mine.handle.bytes.data(), mine.handle.bytes.size());
  gnio::platform::IpcHandle theirs;
  receive_message(rank.sock(), theirs.bytes.data(), theirs.bytes.size());
  void* peer_ptr = be.ipc_open(theirs);
  check_pattern(rank, f, static_cast<const std::uint32_t*>(peer_ptr), n, 10u + peer,
                "read of the peer's IPC allocation");
  barrier(rank.sock());  // both done reading before anything is closed
  be.ipc_close(peer_ptr);
  barrier(rank.sock());  // the peer closed its mapping of ours before we free it
  be.ipc_free(mine.ptr);
  return rank.failures();
}

/// One rank: host-mapped memory written by kernels and read by the host, and the other way.
int host_mapped(Rank& rank) {
  if (!have_gpus(rank, 1)) return kSkip;
  Fixture f(0);
  CudaBackend& be = f.be;
  const std::size_t n = (std::size_t{1} << 20) + 17;
  auto* p = static_cast<std::uint32_t*>(be.alloc_host_mapped(n * sizeof(std::uint32_t)));
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; ++i) nonzero += p[i] != 0;
  rank.check(nonzero == 0, "alloc_host_mapped: %zu of %zu elements not zero", nonzero, n);

  launch_write(f.stream, p, n, 5);
  be.stream_synchronize(f.stream);
  std::size_t first = 0;
  std::vector<std::uint32_t> seen(p, p + n);
  std::size_t wrong = host_mismatches(seen, 5, &first);
  rank.check(wrong == 0, "kernel writes to host-mapped memory: %zu of %zu wrong (first at %zu)",
             wrong, n, first);

  for (std::size_t i = 0; i < n; ++i) p[i] = pattern(i, 9);
  unsigned long long dfirst = 0;
  unsigned long long dwrong = f.wrong_on_device(p, n, 9, &dfirst);
  rank.check(dwrong == 0, "host writes read by a kernel: %llu of %zu wrong (first at %llu)", dwrong,
             n, dfirst);
  be.free_host_mapped(p);
  rank.expect_error(ErrorClass::InvalidArgument, "positive", "alloc_host_mapped(0)",
                    [&] { be.alloc_host_mapped(0); });
  return rank.failures();
}

/// One rank: stream creation, idle/synchronize, copies and fills in stream order.
int streams(Rank& rank) {
  if (!have_gpus(rank, 1)) return kSkip;
  Fixture f(0);
  CudaBackend& be = f.be;
  rank.check(f.host_stream_cleared, "create_stream did not clear the host out-pointer");
  rank.check(f.stream != nullptr, "create_stream returned no CUDA stream");
  rank.check(be.stream_idle(f.stream), "a new stream is not idle");

  spin_for<<<1, 1, 0, f.stream>>>(200ull * 1000 * 1000);  // 200 ms
  rank.check(cudaGetLastError() == cudaSuccess, "spin_for launch failed");
  rank.check(!be.stream_idle(f.stream), "stream idle right after queueing 200 ms of work");
  be.stream_synchronize(f.stream);
  rank.check(be.stream_idle(f.stream), "stream not idle after stream_synchronize");
  rank.check(cudaGetLastError() == cudaSuccess,
             "stream_idle's 'not ready' leaked into cudaGetLastError()");

  const std::size_t bytes = (std::size_t{8} << 20) + 3;
  auto* d = static_cast<unsigned char*>(be.alloc_device(bytes));
  auto* d2 = static_cast<unsigned char*>(be.alloc_device(bytes));
  auto* h = static_cast<unsigned char*>(be.alloc_host_mapped(bytes));
  be.fill(d, 0x5a, bytes, f.stream);
  be.copy(d2, d, bytes, f.stream);  // device to device
  be.fill(d2, 0xc3, 1000, f.stream);
  be.copy(h, d2, bytes, f.stream);  // device to host-mapped
  be.copy(h, d2, 0, f.stream);      // empty copy: no-op
  be.stream_synchronize(f.stream);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < bytes; ++i) wrong += h[i] != (i < 1000 ? 0xc3 : 0x5a);
  rank.check(wrong == 0, "fill/copy in stream order: %zu of %zu bytes wrong", wrong, bytes);

  be.device_synchronize();
  be.free_host_mapped(h);
  be.free_device(d2);
  be.free_device(d);
  return rank.failures();
}

/// One rank: argument and driver errors carry the class, the CUDA error and the GPU.
int errors(Rank& rank) {
  if (!have_gpus(rank, 1)) return kSkip;
  const int count = gnio::platform::cuda_device_count();
  rank.expect_error(ErrorClass::InvalidArgument, "out of range", "ordinal == count",
                    [&] { gnio::platform::make_cuda_backend(count); });
  rank.expect_error(ErrorClass::InvalidArgument, "out of range", "ordinal -1",
                    [&] { gnio::platform::make_cuda_backend(-1); });
  Fixture f(0);
  CudaBackend& be = f.be;
  rank.check(be.describe().find("sm_") != std::string::npos, "describe() = '%s'",
             be.describe().c_str());
  rank.check(gnio::platform::cuda_backend_compiled(), "cuda_backend_compiled() is false");
  rank.expect_error(ErrorClass::InvalidArgument, "positive", "create_chunk(0)",
                    [&] { be.create_chunk(0); });

  const std::vector<gnio::platform::CudaDeviceInfo> devices = gnio::platform::cuda_devices();
  rank.check(static_cast<int>(devices.size()) == count, "cuda_devices(): %zu entries, %d GPUs",
             devices.size(), count);
  for (const auto& d : devices) {
    rank.say("GPU %d: %s sm_%d%d, %d SMs, %.1f GiB, PCI %s, vmm %d, posix fd %d, gdr %d", d.ordinal,
             d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count,
             static_cast<double>(d.total_memory) / double(1ull << 30), d.pci_bus_id.c_str(), d.vmm,
             d.vmm_posix_fd, d.vmm_gpudirect_rdma);
    rank.check(!d.name.empty() && d.sm_count > 0 && d.total_memory > 0,
               "cuda_devices(): GPU %d has no name, SMs or memory", d.ordinal);
    rank.check(static_cast<int>(d.peers.size()) == count - 1, "GPU %d: %zu peers listed", d.ordinal,
               d.peers.size());
    for (const auto& p : d.peers)
      rank.say("  -> GPU %d: access %d, rank %d, native atomics %d", p.peer, p.can_access,
               p.performance_rank, p.native_atomics);
  }
  const auto v = gnio::platform::cuda_versions();
  rank.check(v.driver > 0 && v.runtime > 0, "cuda_versions(): driver %d, runtime %d", v.driver,
             v.runtime);
  return rank.failures();
}

/// True when GPU `ordinal` has an active primary context in this process (driver query, fetched
/// at run time like libgnio does, so the test does not link libcuda either).
bool has_primary_context(int ordinal) {
  static PFN_cuDevicePrimaryCtxGetState_v7000 get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                         cudaEnableDefault, &status) != cudaSuccess)
      throw std::runtime_error("cuDevicePrimaryCtxGetState not found");
    return reinterpret_cast<PFN_cuDevicePrimaryCtxGetState_v7000>(fn);
  }();
  unsigned flags = 0;
  int active = 0;
  if (get_state(ordinal, &flags, &active) != CUDA_SUCCESS)
    throw std::runtime_error("cuDevicePrimaryCtxGetState failed");
  return active != 0;
}

/// One process, two GPUs: the backend on GPU 1 makes its GPU current for each call and restores
/// the caller's device, and never creates a context on GPU 0 for a thread that had none.
int device_selection(Rank& rank) {
  if (!have_gpus(rank, 2)) return kSkip;
  Fixture f(1);
  int current = -1;
  rank.check(cudaGetDevice(&current) == cudaSuccess && current == 1,
             "the constructor left GPU %d current, expected 1", current);
  std::string thread_error;
  std::thread([&] {
    // A fresh thread has no context; the backend must not "restore" it onto GPU 0.
    try {
      f.be.free_device(f.be.alloc_device(4096));
    } catch (const std::exception& e) {
      thread_error = e.what();
    }
  }).join();
  rank.check(thread_error.empty(), "alloc_device on a new thread: %s", thread_error.c_str());
  rank.check(!has_primary_context(0),
             "using the GPU 1 backend from a new thread created a context on GPU 0");
  rank.check(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0) failed");
  void* p = f.be.alloc_device(4096);
  cudaPointerAttributes attr{};
  rank.check(cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.device == 1,
             "alloc_device from a thread on GPU 0 allocated on GPU %d, expected 1", attr.device);
  rank.check(cudaGetDevice(&current) == cudaSuccess && current == 0,
             "the backend left GPU %d current, expected the caller's 0", current);
  f.be.free_device(p);
  return rank.failures();
}

// ---- tests that make CUDA fail on purpose (label gpu_fault: compute-sanitizer runs leave them
// out, as it reports every failed CUDA call and every fault) ----------------------------------

/// One rank: a failed allocation is a SystemError naming the CUDA error and the GPU, and leaves
/// no error behind for the next launch check.
int out_of_memory(Rank& rank) {
  if (!have_gpus(rank, 1)) return kSkip;
  Fixture f(0);
  rank.expect_error(ErrorClass::SystemError, "cudaErrorMemoryAllocation", "1 PiB cudaMalloc",
                    [&] { f.be.alloc_device(std::size_t{1} << 50); });
  rank.expect_error(ErrorClass::SystemError, "on GPU 0", "1 PiB cudaMalloc",
                    [&] { f.be.alloc_device(std::size_t{1} << 50); });
  spin_for<<<1, 1, 0, f.stream>>>(1000);
  rank.check(cudaGetLastError() == cudaSuccess, "an earlier error leaked into a launch check");
  f.be.stream_synchronize(f.stream);
  return rank.failures();
}

/// One rank: a kernel faults; the next synchronisation reports a sticky error that says the
/// context is unusable.
int sticky_fault(Rank& rank) {
  if (!have_gpus(rank, 1)) return kSkip;
  Fixture f(0);
  store_to<<<1, 1, 0, f.stream>>>(reinterpret_cast<int*>(0x10));
  rank.expect_error(ErrorClass::SystemError, "unusable", "synchronize after a faulting kernel",
                    [&] { f.be.device_synchronize(); });
  // The context is gone: skip the Fixture's releases, which would only log more of the same.
  std::fflush(stderr);
  ::_exit(rank.failures());
}

}  // namespace

TEST(CudaBackend, PeerMappedHeapTwoGpus) {
  RUN_RANKS(2, peer_mapped_heap);
}
TEST(CudaBackend, IpcFallbackTwoGpus) {
  RUN_RANKS(2, ipc_fallback);
}
TEST(CudaBackend, HostMappedMemory) {
  RUN_RANKS(1, host_mapped);
}
TEST(CudaBackend, Streams) {
  RUN_RANKS(1, streams);
}
TEST(CudaBackend, DeviceSelectionTwoGpus) {
  RUN_RANKS(1, device_selection);
}
TEST(CudaBackend, Errors) {
  RUN_RANKS(1, errors);
}
TEST(CudaBackendFault, OutOfMemoryIsReported) {
  RUN_RANKS(1, out_of_memory);
}
TEST(CudaBackendFault, StickyErrorIsReported) {
  RUN_RANKS(1, sticky_fault);
}
