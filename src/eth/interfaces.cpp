// eth::interfaces() and eth::availability(): what gnio-info lists about packet I/O, from sysfs and
// a trial load of libxdp; no socket is opened.
#include <dlfcn.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gnio/eth.hpp"

namespace gnio::eth {
namespace {

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

unsigned count_prefixed(const std::filesystem::path& dir, const std::string& prefix) {
  unsigned n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

/// The driver's name as `ethtool -i` reports it (virtual devices too: "veth").
std::string driver_of(const std::string& name) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&info);
  const bool ok = ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
  ::close(fd);
  return ok ? std::string(info.driver) : std::string();
}

}  // namespace

std::vector<InterfaceInfo> interfaces() {
  std::vector<InterfaceInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    InterfaceInfo i;
    i.name = e.path().filename().string();
    if (i.name == "lo") continue;
    i.ifindex = static_cast<int>(if_nametoindex(i.name.c_str()));
    i.mac = read_line(e.path() / "address");
    i.mtu = static_cast<unsigned>(std::atoi(read_line(e.path() / "mtu").c_str()));
    const std::string state = read_line(e.path() / "operstate");
    i.up = state == "up" || (state == "unknown" && read_line(e.path() / "carrier") == "1");
    i.rx_queues = count_prefixed(e.path() / "queues", "rx-");
    i.tx_queues = count_prefixed(e.path() / "queues", "tx-");
    i.driver = driver_of(i.name);
    static const char* const zero_copy[] = {"mlx5_core", "ice",       "i40e",   "ixgbe",
                                            "igc",       "igb",       "stmmac", "mlx4_en",
                                            "bnxt_en",   "virtio_net"};
    i.zero_copy_driver =
        std::find(std::begin(zero_copy), std::end(zero_copy), i.driver) != std::end(zero_copy);
    out.push_back(std::move(i));
  }
  std::sort(out.begin(), out.end(),
            [](const InterfaceInfo& a, const InterfaceInfo& b) { return a.name < b.name; });
  return out;
}

std::string availability() {
#if GNIO_HAVE_ETH
  void* h = dlopen("libxdp.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return std::string("unavailable: libxdp is not installed (") + dlerror() +
           "); install libxdp1 and libbpf1";
  dlclose(h);
  return "AF_XDP through libxdp (loadable); needs CAP_NET_ADMIN and CAP_NET_RAW to open a port";
#else
  return "unavailable: this gnio was built without libxdp's headers (libxdp-dev, libbpf-dev)";
#endif
}

}  // namespace gnio::eth
