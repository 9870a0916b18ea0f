// FdExchange: node ranks pass memfds to each other; every receiver maps each one and checks the
// data its owner wrote, over several calls (one per "memory chunk").
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/fd_exchange.hpp"
#include "bootstrap_test_util.hpp"
#include "gnio/bootstrap.hpp"

namespace gnio::test {
namespace {

constexpr std::size_t kChunk = 64 * 1024;

std::uint32_t word(int owner, int chunk, std::size_t i) {
  return 0x9e3779b9u * static_cast<std::uint32_t>(owner + 1) + 0x01000193u * chunk +
         static_cast<std::uint32_t>(i) + 1;
}

/// The open descriptors of this process, with what they point to.
std::vector<std::string> open_fds() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.' || std::atoi(e->d_name) == ::dirfd(d)) continue;
      char target[256] = {};
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      ::readlink(link.c_str(), target, sizeof(target) - 1);
      out.push_back(std::string(e->d_name) + " -> " + target);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One rank: `chunks` rounds of create memfd -> write -> allgather_fd -> map every fd -> check.
int exchange_chunks(Bootstrap& b, const std::vector<int>& node, int chunks) {
  FdExchange fx(b, node, b.token());
  CHILD_CHECK(node[fx.local_index()] == b.rank());
  for (int c = 0; c < chunks; ++c) {
    int fd = ::memfd_create("gnio-test-chunk", MFD_CLOEXEC);
    CHILD_CHECK(fd >= 0);
    CHILD_CHECK(::ftruncate(fd, kChunk) == 0);
    void* mine = ::mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHILD_CHECK(mine != MAP_FAILED);
    auto* w = static_cast<std::uint32_t*>(mine);
    for (std::size_t i = 0; i < kChunk / 4; ++i) w[i] = word(b.rank(), c, i);
    std::vector<int> fds = fx.allgather_fd(fd);
    CHILD_CHECK(fds.size() == node.size());
    struct stat own {
    }, dup{};
    CHILD_CHECK(::fstat(fd, &own) == 0 && ::fstat(fds[fx.local_index()], &dup) == 0);
    CHILD_CHECK(fds[fx.local_index()] != fd && own.st_ino == dup.st_ino);
    for (std::size_t j = 0; j < fds.size(); ++j) {
      CHILD_CHECK(fds[j] >= 0);
      CHILD_CHECK((::fcntl(fds[j], F_GETFD) & FD_CLOEXEC) != 0);
      void* p = ::mmap(nullptr, kChunk, PROT_READ, MAP_SHARED, fds[j], 0);
      CHILD_CHECK(p != MAP_FAILED);
      const auto* r = static_cast<const std::uint32_t*>(p);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < kChunk / 4; ++i) wrong += r[i] != word(node[j], c, i);
      ::munmap(p, kChunk);
      ::close(fds[j]);
      CHILD_CHECK(wrong == 0);
    }
    ::munmap(mine, kChunk);
    ::close(fd);
  }
  return 0;
}

class FdExchangeRanks : public ::testing::TestWithParam<int> {};

TEST_P(FdExchangeRanks, MemfdsAreSharedAcrossRepeatedCalls) {
  const int n = GetParam();
  RootHost root;  // the test process stays single-threaded: it forks the ranks
  const UniqueId& id = root.id();
  auto codes = run_ranks(iota_ranks(n), [&](int r) {
    ::setenv("GNIO_BOOTSTRAP_TIMEOUT", "20", 1);
    auto b = Bootstrap::create(id, r, n);
    b->barrier();  // opens the bootstrap connections the barrier below reuses
    std::vector<std::string> before = open_fds();
    if (int rc = exchange_chunks(*b, iota_ranks(n), 5)) return rc;
    std::vector<std::string> after = open_fds();
    if (after != before)
      for (const std::string& f : after)
        if (std::find(before.begin(), before.end(), f) == before.end())
          std::fprintf(stderr, "rank %d: new descriptor %s\n", r, f.c_str());
    CHILD_CHECK(after == before);  // nothing leaked: connections and descriptors closed
    b->barrier();
    return 0;
  });
  for (int i = 0; i < n; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
}

INSTANTIATE_TEST_SUITE_P(Ranks, FdExchangeRanks, ::testing::Values(2, 4));

// Four ranks as two simulated nodes {0, 2} and {1, 3}: each group exchanges among itself only.
TEST(FdExchange, TwoNodesOnOneHost) {
  RootHost root;  // the test process stays single-threaded: it forks the ranks
  const UniqueId& id = root.id();
  auto codes = run_ranks(iota_ranks(4), [&](int r) {
    auto b = Bootstrap::create(id, r, 4);
    std::vector<int> node = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    return exchange_chunks(*b, node, 3);
  });
  for (int i = 0; i < 4; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
}

// Strangers on the abstract socket (garbage, a wrong token) are dropped; the exchange goes on.
TEST(FdExchange, StrangersOnTheSocketAreIgnored) {
  RootHost root;  // the test process stays single-threaded: it forks the ranks
  const UniqueId& id = root.id();
  const std::uint64_t token = bootstrap::decode_unique_id(id.bytes, 128)->token;
  auto codes = run_ranks(iota_ranks(3), [&](int r) {
    auto b = Bootstrap::create(id, r, 3);
    FdExchange fx(*b, {0, 1, 2}, b->token());
    b->barrier();  // every listener exists
    if (r == 0) {
      for (int target = 0; target < 3; ++target) {
        char name[64];
        std::snprintf(name, sizeof(name), "gnio-fdx-%016llx-%d",
                      static_cast<unsigned long long>(token), target);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path + 1, name, std::strlen(name));
        socklen_t len =
            static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(name));
        for (int kind = 0; kind < 3; ++kind) {
          int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
          if (::connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0) {
            if (kind == 1) ::send(s, "garbage!", 8, MSG_NOSIGNAL);
            if (kind == 2) {
              auto h = hello_bytes(bootstrap::Purpose::FdExchange, token ^ 1, 1, 3);
              ::send(s, h.data(), h.size(), MSG_NOSIGNAL);
            }
          }
          ::close(s);
        }
      }
    }
    b->barrier();
    int fd = ::memfd_create("x", MFD_CLOEXEC);
    CHILD_CHECK(::ftruncate(fd, 4096) == 0);
    std::uint64_t mark = 0x5555000000000000ull + r;
    CHILD_CHECK(::pwrite(fd, &mark, sizeof(mark), 0) == sizeof(mark));
    std::vector<int> fds = fx.allgather_fd(fd);
    for (int j = 0; j < 3; ++j) {
      std::uint64_t got = 0;
      CHILD_CHECK(::pread(fds[j], &got, sizeof(got), 0) == sizeof(got));
      CHILD_CHECK(got == 0x5555000000000000ull + j);
      ::close(fds[j]);
    }
    ::close(fd);
    return 0;
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
}

TEST(FdExchange, MissingNodeRankTimesOutNamingIt) {
  RootHost root;  // the test process stays single-threaded: it forks the ranks
  const UniqueId& id = root.id();
  auto codes = run_ranks(iota_ranks(3), [&](int r) {
    ::setenv("GNIO_BOOTSTRAP_TIMEOUT", "1", 1);
    auto b = Bootstrap::create(id, r, 3);
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // never makes an FdExchange
      return 0;
    }
    FdExchange fx(*b, {0, 1, 2}, b->token());
    int fd = ::memfd_create("x", MFD_CLOEXEC);
    try {
      fx.allgather_fd(fd);
    } catch (const Error& e) {
      std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      CHILD_CHECK(e.error_class() == ErrorClass::Timeout);
      CHILD_CHECK(std::string(e.what()).find("world rank 2") != std::string::npos);
      return 0;
    }
    CHILD_CHECK(false);
    return 0;
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
}

TEST(FdExchange, BadArgumentsAreInvalid) {
  RootHost root;  // the test process stays single-threaded: it forks the ranks
  const UniqueId& id = root.id();
  auto codes = run_ranks({0}, [&](int) {
    auto b = Bootstrap::create(id, 0, 1);
    auto invalid = [](const std::function<void()>& fn) {
      try {
        fn();
      } catch (const Error& e) {
        return e.error_class() == ErrorClass::InvalidArgument;
      }
      return false;
    };
    CHILD_CHECK(invalid([&] { FdExchange(*b, {}, 1); }));
    CHILD_CHECK(invalid([&] { FdExchange(*b, {1}, 1); }));
    FdExchange fx(*b, {0}, b->token());
    CHILD_CHECK(invalid([&] { fx.allgather_fd(-1); }));
    CHILD_CHECK(invalid([&] { fx.allgather_fd(12345); }));
    int fd = ::memfd_create("x", MFD_CLOEXEC);
    std::vector<int> one = fx.allgather_fd(fd);
    CHILD_CHECK(one.size() == 1 && one[0] != fd && one[0] >= 0);
    ::close(one[0]);
    ::close(fd);
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
}

}  // namespace
}  // namespace gnio::test
