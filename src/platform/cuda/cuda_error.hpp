// Turning CUDA runtime and driver failures into gnio::Error(SystemError) with a message that names
// the call, the CUDA error (name and text), the GPU, and what to do next.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

namespace gnio::platform::cuda_impl {

/// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string error_text(cudaError_t err);
/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; numeric when the driver API is not loaded.
std::string error_text(CUresult res);

/// True for errors after which the process's CUDA context is unusable: every later call fails
/// with the same error until the process exits.
bool is_sticky(cudaError_t err) noexcept;
bool is_sticky(CUresult res) noexcept;

/// Throws Error(SystemError): "<call> failed on GPU <device>: <error>. <advice>". `fmt` describes
/// the call and its arguments (printf-style). Clears the runtime's last-error state first, so a
/// later kernel-launch check does not report this error again.
[[noreturn]] void fail_runtime(cudaError_t err, int device, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/// As fail_runtime(), for a driver API call.
[[noreturn]] void fail_driver(CUresult res, int device, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// For noexcept teardown paths (free, destroy): logs the failure at WARN instead of throwing.
void warn_runtime(cudaError_t err, int device, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));
void warn_driver(CUresult res, int device, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

}  // namespace gnio::platform::cuda_impl

/// Runs a CUDA runtime call; on failure throws through fail_runtime() with the printf-style
/// description that follows (`GNIO_CUDA_CHECK(dev, cudaMalloc(&p, n), "cudaMalloc(%zu)", n)`).
#define GNIO_CUDA_CHECK(device, call, ...)                                            \
  do {                                                                                \
    if (const cudaError_t gnio_cuda_err_ = (call); gnio_cuda_err_ != cudaSuccess)     \
      ::gnio::platform::cuda_impl::fail_runtime(gnio_cuda_err_, device, __VA_ARGS__); \
  } while (0)

/// As GNIO_CUDA_CHECK, for a driver API call (a CUresult).
#define GNIO_CU_CHECK(device, call, ...)                                           \
  do {                                                                             \
    if (const CUresult gnio_cu_res_ = (call); gnio_cu_res_ != CUDA_SUCCESS)        \
      ::gnio::platform::cuda_impl::fail_driver(gnio_cu_res_, device, __VA_ARGS__); \
  } while (0)
