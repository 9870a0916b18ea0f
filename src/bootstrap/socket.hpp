// Socket plumbing shared by the bootstrap's root service, ranks and FdExchange: an owning file
// descriptor, IPv4/IPv6 addresses, interface selection, and I/O with deadlines.
//
// Conventions: every descriptor is created close-on-exec; sockets the event loops watch are
// non-blocking; every blocking step is a poll() bounded by a Deadline; EINTR is retried; sends use
// MSG_NOSIGNAL so a closed peer is an error code, never SIGPIPE.
//
// Defined by concept: SockAddr in sock_addr.cpp, the choice of a listener's address among this
// host's interfaces in interface_choice.cpp, descriptors, I/O and diagnostics in socket.cpp.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/deadline.hpp"
#include "bootstrap/wire.hpp"

namespace gnio::bootstrap {

/// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives up ownership.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the current descriptor (if any) and owns `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// An IPv4 or IPv6 socket address.
class SockAddr {
 public:
  SockAddr() = default;
  /// Copies `len` bytes of a sockaddr (truncated to sockaddr_storage).
  SockAddr(const sockaddr* sa, socklen_t len);

  /// Parses a numeric IPv4/IPv6 address ("10.0.0.1", "fe80::1%eth0", "[::1]"); nullopt if it is
  /// not one.
  static std::optional<SockAddr> parse_numeric(const std::string& text, std::uint16_t port);
  /// Resolves a host name or numeric address (getaddrinfo; prefers IPv4). Throws
  /// Error(InvalidArgument) naming `what` (the variable it came from) when it does not resolve.
  static SockAddr resolve(const std::string& host, std::uint16_t port, const char* what);
  /// Conversions from and to the wire form.
  static SockAddr from_net(const NetAddress& a);
  NetAddress to_net() const;

  /// AF_INET or AF_INET6 (AF_UNSPEC when empty).
  int family() const { return ss_.ss_family; }
  /// The port in host order.
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  /// 127.0.0.0/8, ::1 or an IPv4-mapped loopback address.
  bool is_loopback() const;
  /// 0.0.0.0 or ::.
  bool is_wildcard() const;
  /// The same family's wildcard address ("0.0.0.0" / "::") with this port.
  SockAddr wildcard() const;
  /// "10.0.0.1:29500" or "[fe80::1%2]:29500".
  std::string to_string() const;
  /// The address without the port ("10.0.0.1", "fe80::1").
  std::string host_string() const;
  /// Same family and address (ports ignored).
  bool same_host(const SockAddr& o) const;

  /// For socket calls.
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss_); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss_); }
  socklen_t len() const { return len_; }

 private:
  sockaddr_storage ss_{};
  socklen_t len_ = 0;
};

/// The address of a local socket (getsockname). Throws Error(SystemError) on failure.
SockAddr local_address(int fd);

/// True when `addr` (port ignored) is assigned to one of this host's interfaces.
bool is_local_address(const SockAddr& addr);

/// The address a rank binds its listener to:
///  1. GNIO_BOOTSTRAP_ADDR, when it is an address of this host (when it is not, it names the
///     root of an Open MPI/Slurm/PMI job; see launch_info_from_env);
///  2. the first address of an interface chosen by GNIO_SOCKET_IFNAME (a comma list of name
///     prefixes; "=name" matches exactly; "^prefix" excludes), of the root's family if possible;
///  3. the local address the kernel routes `toward` from (so the root can reach it back);
///  4. the first non-loopback interface, else loopback.
/// Port 0. Throws Error(InvalidArgument) when GNIO_SOCKET_IFNAME matches no interface.
SockAddr choose_rank_address(const SockAddr& toward);
/// The address create_unique_id() binds the root service to: GNIO_BOOTSTRAP_ADDR, else the
/// GNIO_SOCKET_IFNAME interface, else the first non-loopback interface (IPv4 first), else
/// loopback. Port 0.
SockAddr choose_root_address();

/// A listening TCP socket bound to `addr` (non-blocking, close-on-exec, SO_REUSEADDR). Throws
/// Error(SystemError) saying what to change when the address or port cannot be bound.
Fd listen_tcp(const SockAddr& addr, const char* what);

/// Outcome of an I/O step bounded by a deadline.
enum class IoStatus { Ok, Closed, Timeout, Error };

/// Connects a non-blocking, close-on-exec TCP socket to `to`, waiting until `deadline`. On
/// failure returns an empty Fd with *err = errno (ETIMEDOUT when the deadline passed).
Fd connect_tcp(const SockAddr& to, const Deadline& deadline, int* err);

/// ThreadSanitizer cannot see the order messages between processes carry; it orders each socket
/// receive after the sends on that socket only. The bootstrap's messages and the ucx proxy's
/// (carried by UCX, whose interceptors the ucx tests ignore) release one process-wide order when
/// sent and acquire it when taken, so that what a thread here did before it told a peer
/// something happens before what the peer's answer makes a thread here do (a proxy lands a put
/// after this rank's barrier; the main thread reads it after the peer's). No-ops in other builds.
void release_network_order_for_tsan();
void acquire_network_order_for_tsan();

/// Writes `a` then `b` (b may be empty) to a non-blocking socket in as few system calls as
/// possible, waiting for buffer space until `until`. A Deadline::no_progress_for deadline is
/// renewed whenever bytes move, so a large transfer over a slow but live link never times out
/// and a stalled one does after the span. *err is set on Error/Closed.
IoStatus send_all(int fd, const void* a, std::size_t a_len, const void* b, std::size_t b_len,
                  const Deadline& until, int* err);
/// Reads exactly `len` bytes from a non-blocking socket before `until` (renewed on progress as in
/// send_all). *err is set on Error/Closed.
IoStatus recv_all(int fd, void* data, std::size_t len, const Deadline& until, int* err);
/// Reads at least `min` and at most `max` bytes (whatever the socket holds, up to `max`) into
/// `data` before `until` (renewed on progress); *got says how many arrived, also on failure. *err
/// is set on Error/Closed.
IoStatus recv_at_least(int fd, void* data, std::size_t min, std::size_t max, const Deadline& until,
                       int* err, std::size_t* got);

/// Sets TCP_NODELAY (best effort): bootstrap messages are small and latency-bound.
void set_nodelay(int fd);

/// poll() on one descriptor for `events`, until `deadline`; EINTR retried. Returns revents, 0 on
/// timeout, -1 on error.
int poll_one(int fd, short events, const Deadline& deadline);

/// A wake-up descriptor for event loops (an eventfd).
class Waker {
 public:
  Waker();
  int fd() const { return fd_.get(); }
  void notify();
  void drain();

 private:
  Fd fd_;
};

/// Logs dropped stray connections at WARN once per source address (then at TRACE), so a port
/// scanner is visible without flooding the log. Thread-safe.
class DropLog {
 public:
  /// `where`: "root 10.0.0.1:29500" or "rank 3 listener 10.0.0.2:41234".
  explicit DropLog(std::string where) : where_(std::move(where)) {}
  void drop(const std::string& peer_host, const std::string& peer, const char* reason);
  std::uint64_t dropped() const;

 private:
  std::string where_;
  mutable std::mutex mutex_;
  std::set<std::string> warned_;
  std::uint64_t dropped_ = 0;
};

/// "2, 3, 7-9" for {2, 3, 7, 8, 9}; long lists are cut after `max_items` items.
std::string format_rank_list(const std::vector<int>& ranks, std::size_t max_items = 32);

/// "%g" of a number of seconds, for messages.
std::string seconds_text(double seconds);

/// This host's name (for diagnostics).
std::string host_name();

}  // namespace gnio::bootstrap
