#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close() is not retried on EINTR: on Linux the fd is gone anyway
  fd_ = fd;
}

// ---------------------------------------------------------------------------------------------
// SockAddr

SockAddr::SockAddr(const sockaddr* sa, socklen_t len) {
  len_ = std::min<socklen_t>(len, sizeof(ss_));
  std::memcpy(&ss_, sa, len_);
}

std::optional<SockAddr> SockAddr::parse_numeric(const std::string& text, std::uint16_t port) {
  std::string host = text;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return std::nullopt;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  SockAddr a(res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  a.set_port(port);
  return a;
}

SockAddr SockAddr::resolve(const std::string& host, std::uint16_t port, const char* what) {
  if (auto numeric = parse_numeric(host, port)) return *numeric;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    fail(ErrorClass::InvalidArgument,
         "bootstrap: cannot resolve host '%s' (from %s): %s; set it to an IP address or a name "
         "this host can resolve",
         host.c_str(), what, ::gai_strerror(rc));
  const addrinfo* pick = res;
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) {
      pick = r;
      break;
    }
  SockAddr a(pick->ai_addr, pick->ai_addrlen);
  ::freeaddrinfo(res);
  a.set_port(port);
  return a;
}

SockAddr SockAddr::from_net(const NetAddress& n) {
  SockAddr a;
  if (n.family == 4) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(n.port);
    std::memcpy(&in.sin_addr, n.bytes.data(), 4);
    a = SockAddr(reinterpret_cast<sockaddr*>(&in), sizeof(in));
  } else {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(n.port);
    in6.sin6_scope_id = n.scope_id;
    std::memcpy(&in6.sin6_addr, n.bytes.data(), 16);
    a = SockAddr(reinterpret_cast<sockaddr*>(&in6), sizeof(in6));
  }
  return a;
}

NetAddress SockAddr::to_net() const {
  NetAddress n;
  n.port = port();
  if (family() == AF_INET) {
    n.family = 4;
    std::memcpy(n.bytes.data(), &reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr, 4);
  } else {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss_);
    n.family = 6;
    n.scope_id = in6->sin6_scope_id;
    std::memcpy(n.bytes.data(), &in6->sin6_addr, 16);
  }
  return n;
}

std::uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_port);
  return 0;
}

void SockAddr::set_port(std::uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss_)->sin6_port = htons(port);
}

bool SockAddr::is_loopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) {
    const auto* a = &reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(a)) return a->s6_addr[12] == 127;
  }
  return false;
}

bool SockAddr::is_wildcard() const {
  if (family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (family() == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_addr);
  return false;
}

SockAddr SockAddr::wildcard() const {
  SockAddr w;
  if (family() == AF_INET6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_any;
    w = SockAddr(reinterpret_cast<sockaddr*>(&in6), sizeof(in6));
  } else {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_ANY);
    w = SockAddr(reinterpret_cast<sockaddr*>(&in), sizeof(in));
  }
  w.set_port(port());
  return w;
}

std::string SockAddr::host_string() const {
  char buf[INET6_ADDRSTRLEN + 16] = {};
  if (family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr, buf, sizeof(buf));
    return buf;
  }
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss_);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    std::string s = buf;
    if (in6->sin6_scope_id) s += "%" + std::to_string(in6->sin6_scope_id);
    return s;
  }
  return "?";
}

std::string SockAddr::to_string() const {
  if (family() == AF_INET6) return "[" + host_string() + "]:" + std::to_string(port());
  return host_string() + ":" + std::to_string(port());
}

bool SockAddr::same_host(const SockAddr& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&o.ss_)->sin_addr.s_addr;
  if (family() == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&o.ss_)->sin6_addr, 16) == 0;
  return false;
}

SockAddr local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    fail_errno("bootstrap: getsockname");
  return SockAddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// ---------------------------------------------------------------------------------------------
// Interfaces

namespace {

struct Interface {
  std::string name;
  SockAddr addr;
  bool loopback = false;
};

bool is_link_local(const SockAddr& a) {
  if (a.family() != AF_INET6) return false;
  sockaddr_in6 in6{};
  std::memcpy(&in6, a.sa(), sizeof(in6));
  return IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr);
}

std::vector<Interface> interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    socklen_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    Interface it{i->ifa_name, SockAddr(i->ifa_addr, len), (i->ifa_flags & IFF_LOOPBACK) != 0};
    it.addr.set_port(0);
    out.push_back(std::move(it));
  }
  ::freeifaddrs(list);
  return out;
}

// NCCL_SOCKET_IFNAME syntax: a comma list of name prefixes; a leading '^' turns the list into
// exclusions, a leading '=' (after any '^') makes every entry an exact name.
bool ifname_matches(const std::string& spec, const std::string& name) {
  std::string s = spec;
  bool exclude = false, exact = false;
  if (!s.empty() && s[0] == '^') {
    exclude = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    exact = true;
    s.erase(0, 1);
  }
  bool hit = false;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    if (!item.empty() && (exact ? name == item : name.compare(0, item.size(), item) == 0))
      hit = true;
    pos = end + 1;
  }
  return exclude ? !hit : hit;
}

// Orders candidates: the wanted family first, then global before link-local addresses.
std::optional<SockAddr> pick(const std::vector<Interface>& list, int family, bool allow_loopback) {
  const SockAddr* best = nullptr;
  int best_score = -1;
  for (const Interface& i : list) {
    if (i.loopback && !allow_loopback) continue;
    int score = (i.addr.family() == family ? 4 : 0) + (is_link_local(i.addr) ? 0 : 2) +
                (i.addr.family() == AF_INET ? 1 : 0);
    if (score > best_score) {
      best = &i.addr;
      best_score = score;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

std::string interface_names(const std::vector<Interface>& list) {
  std::string names;
  for (const Interface& i : list) {
    if (names.find(i.name) != std::string::npos) continue;
    if (!names.empty()) names += ", ";
    names += i.name;
  }
  return names.empty() ? "(none)" : names;
}

std::optional<SockAddr> from_ifname(int family) {
  std::string spec = config_text("GNIO_SOCKET_IFNAME");
  if (spec.empty()) return std::nullopt;
  std::vector<Interface> all = interfaces(), matching;
  for (const Interface& i : all)
    if (ifname_matches(spec, i.name)) matching.push_back(i);
  if (auto a = pick(matching, family, /*allow_loopback=*/true)) return a;
  fail(ErrorClass::InvalidArgument,
       "bootstrap: GNIO_SOCKET_IFNAME='%s' matches no interface that is up and has an IP "
       "address; interfaces here: %s",
       spec.c_str(), interface_names(all).c_str());
}

}  // namespace

bool is_local_address(const SockAddr& addr) {
  if (addr.is_loopback()) return true;
  for (const Interface& i : interfaces())
    if (i.addr.same_host(addr)) return true;
  return false;
}

SockAddr choose_rank_address(const SockAddr& toward) {
  std::string explicit_addr = config_text("GNIO_BOOTSTRAP_ADDR");
  if (!explicit_addr.empty()) {
    SockAddr a = SockAddr::resolve(explicit_addr, 0, "GNIO_BOOTSTRAP_ADDR");
    if (is_local_address(a)) return a;
    GNIO_TRACE(Bootstrap,
               "GNIO_BOOTSTRAP_ADDR=%s is not an address of this host; taking it as "
               "the root's address and choosing the listener address otherwise",
               explicit_addr.c_str());
  }
  if (auto a = from_ifname(toward.family())) return *a;
  // The address the kernel would send from to reach the root is one the root can reach back.
  Fd udp(::socket(toward.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (udp && ::connect(udp.get(), toward.sa(), toward.len()) == 0) {
    SockAddr a = local_address(udp.get());
    if (!a.is_wildcard()) {
      a.set_port(0);
      return a;
    }
  }
  std::vector<Interface> all = interfaces();
  if (auto a = pick(all, toward.family(), false)) return *a;
  if (auto a = pick(all, toward.family(), true)) return *a;
  return *SockAddr::parse_numeric(toward.family() == AF_INET6 ? "::1" : "127.0.0.1", 0);
}

SockAddr choose_root_address() {
  std::string explicit_addr = config_text("GNIO_BOOTSTRAP_ADDR");
  if (!explicit_addr.empty()) return SockAddr::resolve(explicit_addr, 0, "GNIO_BOOTSTRAP_ADDR");
  if (auto a = from_ifname(AF_INET)) return *a;
  std::vector<Interface> all = interfaces();
  if (auto a = pick(all, AF_INET, false)) return *a;
  return *SockAddr::parse_numeric("127.0.0.1", 0);
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
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int rev = poll_one(fd, POLLOUT, deadline);
        if (rev == 0) return IoStatus::Timeout;
        if (rev < 0) {
          *err = errno;
          return IoStatus::Error;
        }
        continue;
      }
      *err = errno;
      return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::Closed : IoStatus::Error;
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
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rev = poll_one(fd, POLLIN, deadline);
      if (rev == 0) return IoStatus::Timeout;
      if (rev < 0) {
        *err = errno;
        return IoStatus::Error;
      }
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? IoStatus::Closed : IoStatus::Error;
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
