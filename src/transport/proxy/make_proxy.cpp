// The one place that knows every proxy backend: make_proxy() picks tcp or ucx for GNIO_NET.
#include <memory>
#include <string>

#include "transport/proxy/proxy.hpp"
#include "transport/proxy/tcp/tcp_proxy.hpp"
#include "transport/proxy/ucx/ucx_proxy.hpp"

namespace gnio::proxy {

std::unique_ptr<Proxy> make_proxy(const std::string& net, const ProxyArgs& args) {
  if (net == "ucx") return make_ucx_proxy(args);
  return make_tcp_proxy(args);
}

}  // namespace gnio::proxy
