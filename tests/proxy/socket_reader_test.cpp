// net::SocketReader, the buffered reader every frame of the tcp proxy is read through: a stream of
// reads of mixed sizes (headers, small puts, pieces larger than its buffer) comes out byte for
// byte as written, whatever the writer's own pieces were; a peer that closes mid-read gives
// Closed; silence gives Timeout at the deadline.
#include "transport/net/tcp/socket_reader.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "base/deadline.hpp"
#include "bootstrap/socket.hpp"
#include "common/socket_pair.hpp"

namespace {

using gnio::Deadline;
using gnio::bootstrap::IoStatus;
using gnio::net::SocketReader;
using gnio_test::SocketPair;

constexpr int kNonBlocking = SOCK_NONBLOCK | SOCK_CLOEXEC;

std::uint8_t byte_at(std::size_t i) {
  return static_cast<std::uint8_t>(i * 29 + (i >> 11) + 5);
}

TEST(SocketReader, MixedReadsComeOutAsWritten) {
  // Read sizes around the reader's 4 KiB buffer (and its half, where reads bypass it).
  const std::size_t sizes[] = {64, 1, 7, 2047, 2048, 2049, 4096, 8, 100000, 64, 3, 1 << 20, 64};
  std::size_t total = 0;
  for (int round = 0; round < 20; ++round)
    for (std::size_t s : sizes) total += s;
  SocketPair p(kNonBlocking);
  std::thread writer([&] {
    std::vector<std::uint8_t> out(total);
    for (std::size_t i = 0; i < total; ++i) out[i] = byte_at(i);
    // The writer's pieces do not follow the reads: 1000 bytes at a time, then the rest.
    int err = 0;
    for (std::size_t at = 0; at < total;) {
      const std::size_t n = at < 200000 ? std::min<std::size_t>(1000, total - at) : total - at;
      EXPECT_EQ(gnio::bootstrap::send_all(p.fd[0], out.data() + at, n, nullptr, 0,
                                          Deadline::after(30), &err),
                IoStatus::Ok);
      at += n;
    }
  });
  SocketReader reader(4096);
  std::size_t at = 0, wrong = 0;
  for (int round = 0; round < 20; ++round)
    for (std::size_t s : sizes) {
      std::vector<std::uint8_t> in(s, 0xA5);
      int err = 0;
      ASSERT_EQ(reader.read(p.fd[1], in.data(), s, Deadline::after(30), &err), IoStatus::Ok);
      for (std::size_t i = 0; i < s; ++i) wrong += in[i] != byte_at(at + i);
      at += s;
    }
  writer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(SocketReader, PeerClosingMidReadIsClosed) {
  SocketPair p(kNonBlocking);
  const std::uint8_t half[32] = {1};
  int err = 0;
  ASSERT_EQ(
      gnio::bootstrap::send_all(p.fd[0], half, sizeof(half), nullptr, 0, Deadline::after(5), &err),
      IoStatus::Ok);
  ::close(p.fd[0]);
  p.fd[0] = -1;
  SocketReader reader(4096);
  std::uint8_t in[64];
  EXPECT_EQ(reader.read(p.fd[1], in, sizeof(in), Deadline::after(5), &err), IoStatus::Closed);
}

TEST(SocketReader, SilenceTimesOutAtTheDeadline) {
  SocketPair p(kNonBlocking);
  SocketReader reader(4096);
  std::uint8_t in[16];
  int err = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.read(p.fd[1], in, sizeof(in), Deadline::after(0.3), &err), IoStatus::Timeout);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 5.0);
}

}  // namespace
