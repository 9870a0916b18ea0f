#include "transport/net/tcp/socket_reader.hpp"

#include <algorithm>
#include <cstring>

namespace gnio::net {

SocketReader::SocketReader(std::size_t capacity) : capacity_(capacity) {}

bootstrap::IoStatus SocketReader::read(int fd, void* dst, std::size_t n, const Deadline& until,
                                       int* err) {
  char* out = static_cast<char*>(dst);
  const std::size_t held = std::min(n, buffered());
  if (held > 0) {  // the buffer may not exist yet (memcpy from null is undefined even for 0)
    std::memcpy(out, buf_.get() + begin_, held);
    begin_ += held;
    out += held;
    n -= held;
  }
  if (begin_ == end_) begin_ = end_ = 0;
  if (n == 0) return bootstrap::IoStatus::Ok;
  // The buffer is empty now. A large read goes straight into place (no copy).
  if (n >= capacity_ / 2) return bootstrap::recv_all(fd, out, n, until, err);
  // new char[] leaves the bytes uninitialised: pages are touched only as recv fills them.
  if (!buf_) buf_.reset(new char[capacity_]);
  // A small read refills the buffer with whatever the socket holds, at least the `n` bytes asked.
  const bootstrap::IoStatus st =
      bootstrap::recv_at_least(fd, buf_.get(), n, capacity_, until, err, &end_);
  if (st != bootstrap::IoStatus::Ok) return st;
  std::memcpy(out, buf_.get(), n);
  begin_ = n;
  if (begin_ == end_) begin_ = end_ = 0;
  return bootstrap::IoStatus::Ok;
}

}  // namespace gnio::net
