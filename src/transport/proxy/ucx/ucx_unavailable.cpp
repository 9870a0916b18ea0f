// make_ucx_proxy() and ucx_summary() of a build without UCX (GNIO_UCX=OFF, or AUTO without
// libucx-dev).
#ifndef GNIO_HAVE_UCX

#include "base/fail.hpp"
#include "transport/proxy/ucx/ucx_proxy.hpp"

namespace gnio::proxy {

std::unique_ptr<Proxy> make_ucx_proxy(const ProxyArgs& args) {
  fail(ErrorClass::Unsupported,
       "rank %d: GNIO_NET=ucx, but this gnio was built without UCX (install libucx-dev and "
       "configure with -DGNIO_UCX=ON, or point UCX_ROOT at a UCX installation); use GNIO_NET=tcp",
       args.bootstrap.rank());
}

std::string ucx_summary() {
  return "not in this build (install libucx-dev and configure with -DGNIO_UCX=ON, or point "
         "UCX_ROOT at a UCX installation)";
}

}  // namespace gnio::proxy

#endif
