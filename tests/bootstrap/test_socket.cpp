// The socket helpers every host-side transfer goes through (send_all/recv_all): with a
// Deadline::no_progress_for deadline (the proxies' data plane) it bounds the absence of progress,
// not the whole transfer. A 4 MiB transfer to a reader that
// takes it slowly (64 KiB every 30 ms: about 2 s) with a 0.5 s deadline completes; the same
// transfer to a reader that never reads ends with Timeout after about 0.5 s.
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

namespace gnio::test {
namespace {

using bootstrap::IoStatus;
using gnio_test::SocketPair;

constexpr int kNonBlocking = SOCK_NONBLOCK | SOCK_CLOEXEC;

constexpr std::size_t kBytes = std::size_t{4} << 20;
constexpr std::size_t kPiece = std::size_t{64} << 10;

TEST(Socket, SlowButSteadyTransferOutlastsTheDeadline) {
  SocketPair p(kNonBlocking);
  std::vector<std::uint8_t> out(kBytes), in(kBytes, 0);
  for (std::size_t i = 0; i < kBytes; ++i) out[i] = static_cast<std::uint8_t>(i * 131 + 7);
  IoStatus sent = IoStatus::Error;
  int send_err = 0;
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    sent = bootstrap::send_all(p.fd[0], out.data(), kBytes, nullptr, 0,
                               Deadline::no_progress_for(0.5), &send_err);
  });
  IoStatus got = IoStatus::Ok;
  for (std::size_t at = 0; at < kBytes && got == IoStatus::Ok; at += kPiece) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    int err = 0;
    got = bootstrap::recv_all(p.fd[1], in.data() + at, kPiece, Deadline::after(5), &err);
  }
  writer.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got, IoStatus::Ok);
  EXPECT_EQ(sent, IoStatus::Ok) << "the sender gave up although bytes kept moving (took " << took
                                << " s, deadline 0.5 s)";
  EXPECT_GT(took, 1.0) << "the reader was meant to be slow";
  EXPECT_TRUE(in == out);
}

TEST(Socket, FixedDeadlineBoundsTheWholeTransfer) {
  // The bootstrap's handshakes keep fixed deadlines: the same slow reader makes the sender give
  // up at the deadline.
  SocketPair p(kNonBlocking);
  std::vector<std::uint8_t> out(kBytes, 3), in(kBytes);
  IoStatus sent = IoStatus::Ok;
  int send_err = 0;
  std::thread writer([&] {
    sent = bootstrap::send_all(p.fd[0], out.data(), kBytes, nullptr, 0, Deadline::after(0.5),
                               &send_err);
  });
  for (std::size_t at = 0; at < kBytes; at += kPiece) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    int err = 0;
    if (bootstrap::recv_all(p.fd[1], in.data() + at, kPiece, Deadline::after(0.2), &err) !=
        IoStatus::Ok)
      break;
  }
  writer.join();
  EXPECT_EQ(sent, IoStatus::Timeout);
}

TEST(Socket, StalledTransferTimesOutAfterTheDeadline) {
  SocketPair p(kNonBlocking);
  std::vector<std::uint8_t> out(kBytes, 1);
  int err = 0;
  const auto start = std::chrono::steady_clock::now();
  const IoStatus sent = bootstrap::send_all(p.fd[0], out.data(), kBytes, nullptr, 0,
                                            Deadline::no_progress_for(0.5), &err);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(sent, IoStatus::Timeout);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 5.0);
}

}  // namespace
}  // namespace gnio::test
