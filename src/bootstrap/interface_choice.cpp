// Which of this host's addresses a listener binds (socket.hpp: choose_rank_address,
// choose_root_address, is_local_address): GNIO_BOOTSTRAP_ADDR, GNIO_SOCKET_IFNAME's syntax and
// the preference among interfaces. Separate from the sockets' I/O (socket.cpp), which does not
// care how an address was chosen.
#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/socket.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {

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

}  // namespace gnio::bootstrap
