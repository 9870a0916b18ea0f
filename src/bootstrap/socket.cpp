#include "bootstrap/socket.hpp"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/fail.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close() is not retried on EINTR: on Linux the fd is gone anyway
  fd_ = fd;
}

// ---------------------------------------------------------------------------------------------
// Sockets and I/O

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort
}

Fd listen_tcp(const SockAddr& addr, const char* what) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) fail_errno("bootstrap: socket() for the %s", what);
  int one = 1;
  // SO_REUSEADDR lets a restarted job rebind a fixed port its predecessor left in TIME_WAIT; it
  // does not allow two live listeners on one port (that needs SO_REUSEPORT, which we never set).
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), addr.sa(), addr.len()) != 0) {
    int err = errno;
    if (err == EADDRINUSE)
      fail(ErrorClass::SystemError,
           "bootstrap: cannot bind the %s to %s: the port is in use (another job on this host, or "
           "a leftover process?); choose another port (GNIO_BOOTSTRAP_PORT / MASTER_PORT)",
           what, addr.to_string().c_str());
    if (err == EADDRNOTAVAIL)
      fail(ErrorClass::SystemError,
           "bootstrap: cannot bind the %s to %s: not an address of this host; fix "
           "GNIO_BOOTSTRAP_ADDR / GNIO_SOCKET_IFNAME / MASTER_ADDR",
           what, addr.to_string().c_str());
    errno = err;
    fail_errno("bootstrap: cannot bind the %s to %s", what, addr.to_string().c_str());
  }
  if (::listen(fd.get(), 4096) != 0)
    fail_errno("bootstrap: listen() for the %s on %s", what, addr.to_string().c_str());
  return fd;
}

int poll_one(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remaining_ms(1000));
    if (rc > 0) return p.revents;
    if (rc < 0 && errno != EINTR) return -1;
    if (rc == 0 && deadline.expired()) return 0;
  }
}

Fd connect_tcp(const SockAddr& to, const Deadline& deadline, int* err) {
  Fd fd(::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    *err = errno;
    return Fd();
  }
  set_nodelay(fd.get());
  if (::connect(fd.get(), to.sa(), to.len()) == 0) return fd;
  if (errno != EINPROGRESS && errno != EINTR && errno != EAGAIN) {
    *err = errno;
    return Fd();
  }
  int rev = poll_one(fd.get(), POLLOUT, deadline);
  if (rev == 0) {
    *err = ETIMEDOUT;
    return Fd();
  }
  if (rev < 0) {
    *err = errno;
    return Fd();
  }
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error != 0) {
    *err = so_error;
    return Fd();
  }
  return fd;
}

namespace {

#if defined(GNIO_TSAN)
extern "C" void __tsan_read_range(void* addr, unsigned long size);
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
/// The order release_network_order_for_tsan() releases and acquire_network_order_for_tsan()
/// acquires.
char network_order_for_tsan;
#endif

/// The most bytes one send or recv system call moves. A call of many megabytes holds the socket
/// for its whole copy, so the peer's window updates (and, on loopback, the other side's copy)
/// wait for it: a 16 MiB put sent and received in calls of at most 1 MiB took 4.0-4.5 ms on the
/// 2-core CPU machine against 7-7.4 ms in one call each (raw loopback TCP, median of 50).
constexpr std::size_t kSocketCallBytes = std::size_t{1} << 20;

/// What a send or recv that failed (returned < 0) means for the loop around it: nullopt to call
/// again (interrupted, or the socket became ready before the deadline), else the loop's result.
std::optional<IoStatus> after_failed_call(int fd, short ready_events, const Deadline& deadline,
                                          int* err) {
  if (errno == EINTR) return std::nullopt;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    int rev = poll_one(fd, ready_events, deadline);
    if (rev == 0) return IoStatus::Timeout;
    if (rev < 0) {
      *err = errno;
      return IoStatus::Error;
    }
    return std::nullopt;
  }
  *err = errno;
  // Only a send sees EPIPE; either call sees a peer's reset.
  return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::Closed : IoStatus::Error;
}

/// ThreadSanitizer orders every socket send before every later socket receive (the network's
/// order, which it cannot see across processes), but its send interceptors record the read of
/// the data after the call returns: when a peer's answer to those bytes already arrived, another
/// thread here may have overwritten them (a collective reusing a slot the answer freed) and the
/// sanitizer reports a race that the network rules out. So under the sanitizer the read is
/// recorded, then the order released (a zero-byte send, which the interceptor sees), and the
/// bytes go out through the bare system call. No-op in other builds.
void record_send_for_tsan(int fd, const void* a, std::size_t a_len, const void* b,
                          std::size_t b_len) {
#if defined(GNIO_TSAN)
  if (a_len) __tsan_read_range(const_cast<void*>(a), a_len);
  if (b_len) __tsan_read_range(const_cast<void*>(b), b_len);
  (void)::send(fd, nullptr, 0, MSG_NOSIGNAL | MSG_DONTWAIT);
#else
  (void)fd, (void)a, (void)a_len, (void)b, (void)b_len;
#endif
}

}  // namespace

void release_network_order_for_tsan() {
#if defined(GNIO_TSAN)
  __tsan_release(&network_order_for_tsan);
#endif
}

void acquire_network_order_for_tsan() {
#if defined(GNIO_TSAN)
  __tsan_acquire(&network_order_for_tsan);
#endif
}

IoStatus send_all(int fd, const void* a, std::size_t a_len, const void* b, std::size_t b_len,
                  const Deadline& until, int* err) {
  Deadline deadline = until;
  iovec iov[2] = {{const_cast<void*>(a), a_len}, {const_cast<void*>(b), b_len}};
  int n_iov = b_len ? 2 : 1;
  iovec* cur = iov;
  record_send_for_tsan(fd, a, a_len, b, b_len);
  while (n_iov > 0) {
    // At most kSocketCallBytes per call: the last iovec is cut short for this call only.
    iovec call[2];
    std::size_t room = kSocketCallBytes;
    int n_call = 0;
    for (; n_call < n_iov && room > 0; ++n_call) {
      call[n_call] = cur[n_call];
      call[n_call].iov_len = std::min(call[n_call].iov_len, room);
      room -= call[n_call].iov_len;
    }
    msghdr msg{};
    msg.msg_iov = call;
    msg.msg_iovlen = static_cast<std::size_t>(n_call);
#if defined(GNIO_TSAN)
    // Recorded above; the interceptor would record the read again, after the bytes left.
    ssize_t n = ::syscall(SYS_sendmsg, fd, &msg, MSG_NOSIGNAL);
#else
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
#endif
    if (n < 0) {
      if (const std::optional<IoStatus> end = after_failed_call(fd, POLLOUT, deadline, err))
        return *end;
      continue;
    }
    deadline = deadline.renewed();  // bytes moved: the deadline counts from here
    auto left = static_cast<std::size_t>(n);
    while (n_iov > 0 && left >= cur->iov_len) {
      left -= cur->iov_len;
      ++cur;
      --n_iov;
    }
    if (n_iov > 0) {
      cur->iov_base = static_cast<char*>(cur->iov_base) + left;
      cur->iov_len -= left;
    }
  }
  return IoStatus::Ok;
}

IoStatus recv_at_least(int fd, void* data, std::size_t min, std::size_t max, const Deadline& until,
                       int* err, std::size_t* got) {
  Deadline deadline = until;
  auto* p = static_cast<char*>(data);
  std::size_t have = 0;
  *got = 0;
  while (have < min) {
    ssize_t n = ::recv(fd, p + have, std::min(max - have, kSocketCallBytes), 0);
    if (n > 0) {
      have += static_cast<std::size_t>(n);
      *got = have;
      deadline = deadline.renewed();  // bytes moved: the deadline counts from here
      continue;
    }
    if (n == 0) return IoStatus::Closed;
    if (const std::optional<IoStatus> end = after_failed_call(fd, POLLIN, deadline, err))
      return *end;
  }
  return IoStatus::Ok;
}

IoStatus recv_all(int fd, void* data, std::size_t len, const Deadline& until, int* err) {
  std::size_t got = 0;
  return recv_at_least(fd, data, len, len, until, err, &got);
}

Waker::Waker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!fd_) fail_errno("bootstrap: eventfd");
}

void Waker::notify() {
  std::uint64_t one = 1;
  while (::write(fd_.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void Waker::drain() {
  std::uint64_t value;
  while (::read(fd_.get(), &value, sizeof(value)) < 0 && errno == EINTR) {
  }
}

// ---------------------------------------------------------------------------------------------
// Diagnostics

void DropLog::drop(const std::string& peer_host, const std::string& peer, const char* reason) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++dropped_;
    // Bounded: a scan from many addresses cannot grow this set without limit.
    if (!warned_.count(peer_host) && warned_.size() < 4096) {
      warned_.insert(peer_host);
      first = true;
    }
  }
  if (first)
    GNIO_WARN(Bootstrap,
              "%s dropped a connection from %s: %s. The job is not affected; further "
              "drops from %s are logged at TRACE",
              where_.c_str(), peer.c_str(), reason, peer_host.c_str());
  else
    GNIO_TRACE(Bootstrap, "%s dropped a connection from %s: %s", where_.c_str(), peer.c_str(),
               reason);
}

std::uint64_t DropLog::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::string format_rank_list(const std::vector<int>& ranks, std::size_t max_items) {
  std::string out;
  std::size_t items = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (items == max_items) {
      out += ", ... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    ++items;
    i = j + 1;
  }
  return out;
}

std::string seconds_text(double seconds) {
  return format("%g", seconds);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "?";
  return name;
}

}  // namespace gnio::bootstrap
