// CUDA driver API entry points, fetched at run time through the runtime.
//
// libgnio links only cudart: linking libcuda would make the library fail to load on machines
// without a GPU driver (CI, laptops), where it must still run on the host backend. The few driver
// functions gnio needs (CUDA VMM, device attributes, error names) are looked up once per process
// with cudaGetDriverEntryPointByVersion, which cudart resolves against the libcuda it loaded
// itself; without a driver the lookup fails quietly and the table says why.
#pragma once

#include <cuda.h>  // types and enums only: nothing from libcuda is linked
#include <cudaTypedefs.h>

#include <string>

namespace gnio::platform::cuda_impl {

/// The driver functions gnio calls. Each pointer has the ABI of the CUDA version named in its
/// type (cudaTypedefs.h); all were requested at kDriverAbiVersion.
struct DriverApi {
  /// CUDA version whose ABI the pointers below follow (12.0: every VMM call gnio uses is older).
  static constexpr unsigned kDriverAbiVersion = 12000;

  /// True when every function below was found; otherwise `missing` says which was not and why.
  bool complete = false;
  std::string missing;

  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle = nullptr;
  // user-buffer registration: what memory a pointer is, and exporting its allocation
  PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute = nullptr;
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle = nullptr;
};

/// The process-wide table, loaded on first use (thread-safe). Never throws and never prints:
/// without a driver it returns a table with complete == false.
const DriverApi& driver_api() noexcept;

}  // namespace gnio::platform::cuda_impl
