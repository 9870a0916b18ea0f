// ScopedDevice: how every CudaBackend call makes the backend's GPU current on the calling thread
// and gives the thread its own device back. Private to src/platform/cuda/.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "platform/cuda/cuda_driver.hpp"
#include "platform/cuda/cuda_error.hpp"

namespace gnio::platform::cuda_impl {

/// Makes `device` current on the calling thread for one backend call, then restores the device
/// the thread had. A thread without a current context is left on `device`: "restoring" it with
/// cudaSetDevice would create a context on GPU 0, costing that GPU hundreds of MiB per process.
class ScopedDevice {
 public:
  /// Throws Error(SystemError) when the device cannot be made current.
  explicit ScopedDevice(int device) : ScopedDevice(device, true) {}
  /// For noexcept paths: a failure is logged and the call goes on with whatever is current.
  /// (Returned by guaranteed copy elision: the class is neither copyable nor movable.)
  static ScopedDevice quiet(int device) noexcept { return ScopedDevice(device, false); }

  ~ScopedDevice() {
    if (restore_ >= 0 && cudaSetDevice(restore_) != cudaSuccess) (void)cudaGetLastError();
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  ScopedDevice(int device, bool throwing) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) {
      (void)cudaGetLastError();
      current = -1;
    }
    if (current == device) return;
    CUcontext ctx = nullptr;
    const DriverApi& api = driver_api();
    bool had_context = api.cuCtxGetCurrent && api.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx;
    if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
      if (throwing) cuda_impl::fail_runtime(err, device, "cudaSetDevice(%d)", device);
      cuda_impl::warn_runtime(err, device, "cudaSetDevice(%d)", device);
      return;
    }
    if (had_context) restore_ = current;
  }

  int restore_ = -1;  // device to make current again, or -1
};

}  // namespace gnio::platform::cuda_impl
