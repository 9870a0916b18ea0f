// eth::Port in a build without libxdp's headers (libxdp-dev): every open says so.
#include "base/fail.hpp"
#include "gnio/eth.hpp"

namespace gnio::eth {

struct Port::Impl {};

Port::Port(Comm&, const PortOptions& options) {
  fail(ErrorClass::Unsupported,
       "eth::Port %s: this gnio was built without libxdp's headers (install libxdp-dev and "
       "libbpf-dev, then rebuild)",
       options.interface.c_str());
}
Port::~Port() = default;
RxQueue Port::rx() const {
  return {};
}
TxQueue Port::tx() const {
  return {};
}
std::string Port::mode() const {
  return {};
}
void Port::stop() {}
PortStats Port::stats() const {
  return {};
}
const std::uint8_t* Port::mac() const {
  return nullptr;
}
int Port::ifindex() const {
  return 0;
}

}  // namespace gnio::eth
