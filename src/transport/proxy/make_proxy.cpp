// The one place that knows every proxy backend: make_proxy() picks tcp or ucx for GNIO_NET.
#include <memory>
#include <string>
#include <utility>

#include "transport/proxy/proxy.hpp"
#include "transport/proxy/tcp/tcp_proxy.hpp"
#include "transport/proxy/ucx/ucx_proxy.hpp"

namespace gnio::proxy {

std::unique_ptr<Proxy> make_proxy(const std::string& net, platform::Backend& backend,
                                  Bootstrap& bootstrap, const std::vector<int>& node_of_rank,
                                  char* heap_base, std::uint64_t heap_bytes, DeviceControl* control,
                                  StreamRef stream, double timeout_s,
                                  std::function<void(int)> on_link_lost) {
  if (net == "ucx")
    return make_ucx_proxy(backend, bootstrap, node_of_rank, heap_base, heap_bytes, control, stream,
                          timeout_s, std::move(on_link_lost));
  return std::make_unique<TcpProxy>(backend, bootstrap, node_of_rank, heap_base, heap_bytes,
                                    control, stream, timeout_s, std::move(on_link_lost));
}

}  // namespace gnio::proxy
