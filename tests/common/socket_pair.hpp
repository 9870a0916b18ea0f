// A connected pair of Unix stream sockets for tests of the socket helpers, closed at scope end (an
// end a test set to -1 after closing it itself is skipped).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gnio_test {

struct SocketPair {
  int fd[2] = {-1, -1};
  /// `flags` are added to SOCK_STREAM (SOCK_NONBLOCK, SOCK_CLOEXEC).
  explicit SocketPair(int flags = 0) {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | flags, 0, fd), 0);
  }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

}  // namespace gnio_test
