// Built when the cuda backend is not compiled in: the entry points say so.
#include "base/fail.hpp"
#include "platform/backend.hpp"

namespace gnio::platform {

std::unique_ptr<Backend> make_cuda_backend(int) {
  fail(ErrorClass::Unsupported,
       "this gnio was built without the cuda backend (GNIO_CUDA=OFF or no nvcc at configure "
       "time); rebuild with -DGNIO_CUDA=ON or use GNIO_BACKEND=host");
}
int cuda_device_count() noexcept {
  return 0;
}
bool cuda_backend_compiled() noexcept {
  return false;
}

}  // namespace gnio::platform

namespace gnio::detail {
[[noreturn]] void throw_launch_error(int err, const char* what) {
  fail(ErrorClass::Internal, "%s: CUDA error %d in a build without CUDA", what, err);
}
}  // namespace gnio::detail

#include "platform/gpu_info.hpp"

namespace gnio::platform {
std::vector<CudaDeviceInfo> cuda_devices() {
  return {};
}
GpuIdentity cuda_device_identity(int) noexcept {
  return {};
}
CudaVersions cuda_versions() noexcept {
  return {};
}
}  // namespace gnio::platform
