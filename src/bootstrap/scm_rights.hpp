// The sending side of descriptor passing over a Unix socket: a sendmsg() header whose ancillary
// data carries one file descriptor (SCM_RIGHTS). FdExchange sends its descriptors with it, and so
// do the tests that pass a descriptor between processes of their own.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstring>

namespace gnio::bootstrap {

/// A message of `bytes` at `data`, with the descriptor `fd` attached when `fd` >= 0 (the
/// descriptor stays the caller's; the receiver gets a new one). The header points into the object,
/// so it is used where it was built: it can be neither copied nor moved.
class ScmRightsMessage {
 public:
  ScmRightsMessage(const void* data, std::size_t bytes, int fd)
      : iov_{const_cast<void*>(data), bytes} {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    if (fd < 0) return;
    msg_.msg_control = control_;
    msg_.msg_controllen = sizeof(control_);
    cmsghdr* c = CMSG_FIRSTHDR(&msg_);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ScmRightsMessage(const ScmRightsMessage&) = delete;
  ScmRightsMessage& operator=(const ScmRightsMessage&) = delete;

  /// For sendmsg().
  const msghdr* header() const { return &msg_; }

 private:
  iovec iov_;
  alignas(cmsghdr) char control_[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg_{};
};

}  // namespace gnio::bootstrap
