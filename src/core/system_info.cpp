// gnio/system_info.hpp: the machine facts tools report, gathered from the layers that know them
// (the cuda backend, the ucx transport, the bootstrap's PMIx path).
#include "gnio/system_info.hpp"

#include "bootstrap/pmix_rendezvous.hpp"
#include "platform/gpu_info.hpp"
#include "transport/proxy/ucx/ucx_proxy.hpp"

namespace gnio {

std::vector<GpuInfo> gpus() {
  return platform::cuda_devices();
}

CudaVersions cuda_versions() noexcept {
  return platform::cuda_versions();
}

std::string ucx_support() {
  return proxy::ucx_summary();
}

std::string pmix_support() {
  const std::string unavailable = bootstrap::pmix_unavailable_reason();
  return unavailable.empty() ? "available (libpmix.so.2 loadable)" : unavailable;
}

}  // namespace gnio
