#include "platform/cuda/cuda_error.hpp"

#include <cstdarg>

#include "base/fail.hpp"
#include "gnio/launch.hpp"
#include "gnio/log.hpp"
#include "platform/cuda/cuda_driver.hpp"

namespace gnio::platform::cuda_impl {
namespace {

// The runtime and the driver number these errors alike, but they are spelled out per API so that
// a renumbering in a future toolkit cannot silently break the classification.
bool is_hardware_fault(cudaError_t e) {
  return e == cudaErrorECCUncorrectable || e == cudaErrorNvlinkUncorrectable ||
         e == cudaErrorContained;
}
bool is_hardware_fault(CUresult r) {
  return r == CUDA_ERROR_ECC_UNCORRECTABLE || r == CUDA_ERROR_NVLINK_UNCORRECTABLE ||
         r == CUDA_ERROR_CONTAINED;
}
bool is_out_of_memory(cudaError_t e) {
  return e == cudaErrorMemoryAllocation;
}
bool is_out_of_memory(CUresult r) {
  return r == CUDA_ERROR_OUT_OF_MEMORY;
}
// The process is exiting and CUDA already tore itself down: releasing is moot, not a failure.
bool is_shutdown(cudaError_t e) {
  return e == cudaErrorCudartUnloading;
}
bool is_shutdown(CUresult r) {
  return r == CUDA_ERROR_DEINITIALIZED;
}

// What the user should do about an error; empty when the error text says enough.
template <class E>
const char* advice(E e) {
  if (is_hardware_fault(e))
    return " This is a hardware fault and it is sticky: the CUDA context of this process is "
           "unusable and every later CUDA call fails. Exit the process; check `nvidia-smi -q` and "
           "the kernel log (Xid) before reusing the GPU.";
  if (is_sticky(e))
    return " This error is sticky: the CUDA context of this process is unusable and every later "
           "CUDA call fails. Release gnio objects and exit the process. A kernel most likely "
           "accessed memory it must not (or trapped); rerun under `compute-sanitizer --tool "
           "memcheck` to find it.";
  if (is_out_of_memory(e))
    return " The GPU is out of memory: free memory, or lower GNIO_HEAP_SIZE / GNIO_HEAP_CHUNK.";
  return "";
}

const char* runtime_advice(cudaError_t e) {
  switch (e) {
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return " The code was not compiled for this GPU's architecture: rebuild gnio and the "
             "application with CMAKE_CUDA_ARCHITECTURES including it (gnio-info prints sm_XY).";
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return " No usable CUDA driver or GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES, or run "
             "with GNIO_BACKEND=host.";
    case cudaErrorInvalidResourceHandle:
      return " A stream or event was used that belongs to another GPU or was already destroyed.";
    default: return advice(e);
  }
}

std::string where(int device) {
  return device >= 0 ? format("GPU %d", device) : std::string("the current GPU");
}

[[noreturn]] void fail_call(const std::string& call, int device, const std::string& error,
                            const char* hint) {
  fail(ErrorClass::SystemError, "%s failed on %s: %s.%s", call.c_str(), where(device).c_str(),
       error.c_str(), hint);
}

// Teardown paths cannot throw; a failure there is logged and otherwise ignored.
template <class E>
void warn_call(E err, int device, const char* fmt, va_list ap) noexcept {
  if (is_shutdown(err)) return;
  try {
    std::string call = vformat(fmt, ap);
    GNIO_WARN(Init, "%s failed on %s: %s (ignored while releasing resources)", call.c_str(),
              where(device).c_str(), error_text(err).c_str());
  } catch (...) {
    // Out of host memory while formatting: nothing sensible is left to report.
  }
}

}  // namespace

std::string error_text(cudaError_t err) {
  return format("%s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
}

std::string error_text(CUresult res) {
  const DriverApi& api = driver_api();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(res, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(res, &text);
  if (!name) return format("CUresult %d", static_cast<int>(res));
  return format("%s (%s)", name, text ? text : "no description");
}

bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained: return true;
    default: return false;
  }
}

bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED: return true;
    default: return false;
  }
}

[[noreturn]] void fail_runtime(cudaError_t err, int device, const char* fmt, ...) {
  (void)cudaGetLastError();  // sticky errors stay; everything else must not leak into later checks
  va_list ap;
  va_start(ap, fmt);
  std::string call = vformat(fmt, ap);
  va_end(ap);
  fail_call(call, device, error_text(err), runtime_advice(err));
}

[[noreturn]] void fail_driver(CUresult res, int device, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string call = vformat(fmt, ap);
  va_end(ap);
  fail_call(call, device, error_text(res), advice(res));
}

void warn_runtime(cudaError_t err, int device, const char* fmt, ...) noexcept {
  (void)cudaGetLastError();
  va_list ap;
  va_start(ap, fmt);
  warn_call(err, device, fmt, ap);
  va_end(ap);
}

void warn_driver(CUresult res, int device, const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  warn_call(res, device, fmt, ap);
  va_end(ap);
}

}  // namespace gnio::platform::cuda_impl

namespace gnio::detail {

[[noreturn]] void throw_launch_error(int err, const char* what) {
  // A launch goes to the calling thread's current device (gnio's backend makes its GPU current).
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  platform::cuda_impl::fail_runtime(static_cast<cudaError_t>(err), device, "%s", what);
}

}  // namespace gnio::detail
