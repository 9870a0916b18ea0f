#include "transport/net/tcp/socket_reader.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gnio::net {

SocketReader::SocketReader(std::size_t capacity) : buf_(capacity) {}

bootstrap::IoStatus SocketReader::read(int fd, void* dst, std::size_t n, const Deadline& until,
                                       int* err) {
  char* out = static_cast<char*>(dst);
  const std::size_t held = std::min(n, buffered());
  std::memcpy(out, buf_.data() + begin_, held);
  begin_ += held;
  out += held;
  n -= held;
  if (begin_ == end_) begin_ = end_ = 0;
  if (n == 0) return bootstrap::IoStatus::Ok;
  // The buffer is empty now. A large read goes straight into place (no copy).
  if (n >= buf_.size() / 2) return bootstrap::recv_all(fd, out, n, until, err);
  Deadline deadline = until;
  while (end_ < n) {
    const ssize_t got = ::recv(fd, buf_.data() + end_, buf_.size() - end_, 0);
    if (got > 0) {
      end_ += static_cast<std::size_t>(got);
      deadline = deadline.renewed();  // bytes moved: the deadline counts from here
      continue;
    }
    if (got == 0) return bootstrap::IoStatus::Closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return errno == ECONNRESET ? bootstrap::IoStatus::Closed : bootstrap::IoStatus::Error;
    }
    if (deadline.expired()) return bootstrap::IoStatus::Timeout;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms(50)) < 0 && errno != EINTR) {
      *err = errno;
      return bootstrap::IoStatus::Error;
    }
  }
  std::memcpy(out, buf_.data(), n);
  begin_ = n;
  if (begin_ == end_) begin_ = end_ = 0;
  return bootstrap::IoStatus::Ok;
}

}  // namespace gnio::net
