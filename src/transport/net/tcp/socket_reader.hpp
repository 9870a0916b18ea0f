// A buffered reader over one non-blocking socket: small reads (frame headers, small puts, acks)
// come out of a buffer that one system call fills with whatever the socket holds, so a burst of
// small messages costs one recv, not two per message; a large read goes straight from the socket
// into its destination. One thread owns a reader. The buffer is allocated at the first read that
// needs it and left uninitialised, so a connection costs memory only for the bytes that actually
// passed through it (a rank holds a reader per connection: one per lane and remote peer).
#pragma once

#include <cstddef>
#include <memory>

#include "base/deadline.hpp"
#include "bootstrap/socket.hpp"

namespace gnio::net {

class SocketReader {
 public:
  /// A reader with `capacity` bytes of buffer (reads of at least half of it bypass the buffer).
  explicit SocketReader(std::size_t capacity = std::size_t{256} << 10);

  /// Reads exactly `n` bytes into `dst`: first what the buffer holds, then from `fd`, waiting for
  /// data until `deadline` (renewed on progress, as bootstrap::recv_all). *err is set on
  /// Error/Closed.
  bootstrap::IoStatus read(int fd, void* dst, std::size_t n, const Deadline& deadline, int* err);
  /// Bytes read from the socket and not yet handed out.
  std::size_t buffered() const { return end_ - begin_; }

 private:
  std::unique_ptr<char[]> buf_;  // capacity_ bytes once a small read needed it
  std::size_t capacity_;
  std::size_t begin_ = 0, end_ = 0;
};

}  // namespace gnio::net
