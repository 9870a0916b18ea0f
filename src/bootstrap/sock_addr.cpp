// SockAddr (socket.hpp): IPv4 and IPv6 addresses, their parsing and resolution, the wire form and
// the text form of messages. Separate from the sockets' I/O (socket.cpp), which only passes
// addresses along.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstring>

#include "base/fail.hpp"
#include "bootstrap/socket.hpp"

namespace gnio::bootstrap {

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

}  // namespace gnio::bootstrap
