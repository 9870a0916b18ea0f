#include "platform/cuda/cuda_driver.hpp"

#include <cuda_runtime_api.h>

#include "base/fail.hpp"

namespace gnio::platform::cuda_impl {
namespace {

// Looks up one symbol; on failure records the first missing one and leaves `*fn` null.
template <class Fn>
void resolve(DriverApi& api, const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, DriverApi::kDriverAbiVersion,
                                                     cudaEnableDefault, &status);
  if (err == cudaSuccess && status == cudaDriverEntryPointSuccess && p) {
    *fn = reinterpret_cast<Fn>(p);
    return;
  }
  // Without a driver cudart reports cudaErrorInsufficientDriver/NoDevice here; clear it so that
  // a later cudaGetLastError() (kernel launch checks) does not pick it up.
  (void)cudaGetLastError();
  if (api.missing.empty()) {
    if (err != cudaSuccess)
      api.missing = format("%s: %s (%s)", symbol, cudaGetErrorName(err), cudaGetErrorString(err));
    else if (status == cudaDriverEntryPointVersionNotSufficent)
      api.missing =
          format("%s: the installed driver is older than CUDA %u.%u", symbol,
                 DriverApi::kDriverAbiVersion / 1000, DriverApi::kDriverAbiVersion % 1000 / 10);
    else
      api.missing = format("%s: not found in the driver", symbol);
  }
}

DriverApi load() noexcept {
  DriverApi api;
  try {
#define GNIO_RESOLVE(name) resolve(api, #name, &api.name)
    GNIO_RESOLVE(cuGetErrorName);
    GNIO_RESOLVE(cuGetErrorString);
    GNIO_RESOLVE(cuDeviceGet);
    GNIO_RESOLVE(cuDeviceGetAttribute);
    GNIO_RESOLVE(cuCtxGetCurrent);
    GNIO_RESOLVE(cuMemGetAllocationGranularity);
    GNIO_RESOLVE(cuMemAddressReserve);
    GNIO_RESOLVE(cuMemAddressFree);
    GNIO_RESOLVE(cuMemCreate);
    GNIO_RESOLVE(cuMemRelease);
    GNIO_RESOLVE(cuMemMap);
    GNIO_RESOLVE(cuMemUnmap);
    GNIO_RESOLVE(cuMemSetAccess);
    GNIO_RESOLVE(cuMemExportToShareableHandle);
    GNIO_RESOLVE(cuMemImportFromShareableHandle);
    GNIO_RESOLVE(cuPointerGetAttribute);
    GNIO_RESOLVE(cuMemGetAddressRange);
    GNIO_RESOLVE(cuMemRetainAllocationHandle);
#undef GNIO_RESOLVE
  } catch (...) {
    // Only format() can throw (std::bad_alloc); report it as a missing driver rather than
    // escaping a noexcept function.
    if (api.missing.empty()) api.missing = "out of host memory while loading the driver API";
  }
  api.complete = api.missing.empty();
  return api;
}

}  // namespace

const DriverApi& driver_api() noexcept {
  static const DriverApi api = load();
  return api;
}

}  // namespace gnio::platform::cuda_impl
