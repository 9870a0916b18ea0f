// Launching one kernel source on either backend. A kernel is a trivially copyable functor (or an
// extended __host__ __device__ lambda) whose `operator()() const` is marked GNIO_HD (a functor's
// better GNIO_HD_INLINE: a body the compiler declines to inline into the kernel reads every field
// of the functor, the DeviceComm's included, through a generic pointer instead of the parameter
// bank; large bodies that call the device API many times get there):
//
//   gnio::launch(stream, {.grid = 4, .block = 128}, [=] GNIO_HD () {
//     size_t i = gnio::dev::global_thread();
//     ...
//   });
//
// On a CUDA stream it runs as a CUDA kernel; on a host-backend stream every thread of the grid
// runs on a CPU thread, all blocks at once, with gnio::dev's thread and barrier functions working
// as on the GPU. Compile the calling file with nvcc (`--extended-lambda` for lambdas) to use the
// cuda backend; a file compiled by a plain C++ compiler launches on host streams only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>

#include "gnio/device/macros.hpp"
#include "gnio/device/thread.hpp"
#include "gnio/stream.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace gnio {

/// A one-dimensional launch shape.
struct LaunchDims {
  unsigned grid = 1;             ///< blocks
  unsigned block = 1;            ///< threads per block
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block (gnio::dev::shared_memory())
};

namespace detail {

/// One host-backend kernel: `body` runs on every thread of the grid.
struct HostTask {
  LaunchDims dims;
  std::function<void()> body;
};

/// Runs `body` as a host-backend kernel on `stream` (asynchronously, in stream order).
void host_launch(HostStream* stream, const LaunchDims& dims, std::function<void()> body);

/// Throws Error(InvalidArgument) for a launch shape the backend cannot run.
void check_launch_dims(const LaunchDims& dims, bool host);

#if defined(__CUDACC__)
// __grid_constant__: the functor (and the DeviceComm inside it) stays in the kernel's constant
// parameter bank. Without it, calling a member function on a by-value parameter makes the
// compiler copy the whole functor to local memory and read every field back from there, which
// costs hundreds of nanoseconds per device-API call.
template <class F>
__global__ void kernel_entry(const __grid_constant__ F f) {
  f();
}
#endif
/// Throws Error(SystemError) naming the kernel launch; `err` is a cudaError_t.
[[noreturn]] void throw_launch_error(int err, const char* what);
/// Throws Error(Unsupported): a CUDA stream was given to a launch compiled without nvcc.
[[noreturn]] void throw_launch_error_not_cuda();

}  // namespace detail

/// Launches `kernel` on `stream` with the given shape. Returns as soon as the work is queued.
/// Throws Error(InvalidArgument) for an empty or oversized shape and Error(Unsupported) for a CUDA
/// stream from a file not compiled by nvcc.
template <class F>
void launch(StreamRef stream, const LaunchDims& dims, F kernel) {
// Host compilers only: nvcc wraps extended lambdas in a type that is copyable but not trivially.
#if !defined(__CUDACC__)
  static_assert(std::is_trivially_copyable_v<F>,
                "a gnio kernel is copied to every thread: it must be trivially copyable");
#endif
  detail::check_launch_dims(dims, stream.is_host());
  if (stream.is_host()) {
    detail::host_launch(stream.host(), dims, [kernel] { kernel(); });
    return;
  }
#if defined(__CUDACC__)
  if (dims.shared_bytes > 48 * 1024) {
    cudaError_t err =
        cudaFuncSetAttribute(detail::kernel_entry<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(dims.shared_bytes));
    if (err != cudaSuccess)
      detail::throw_launch_error(static_cast<int>(err), "gnio::launch (shared memory)");
  }
  detail::kernel_entry<F><<<dims.grid, dims.block, dims.shared_bytes, stream.cuda()>>>(kernel);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    detail::throw_launch_error(static_cast<int>(err), "gnio::launch");
#else
  detail::throw_launch_error_not_cuda();
#endif
}

}  // namespace gnio
