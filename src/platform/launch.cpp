// The backend-independent parts of gnio/launch.hpp: validating a launch shape and the error for a
// CUDA stream handed to a launch that was not compiled by nvcc.
#include "gnio/launch.hpp"

#include "base/fail.hpp"
#include "gnio/config.hpp"

namespace gnio::detail {
namespace {

/// Threads per block on every GPU gnio targets (and the most the host backend emulates).
constexpr unsigned kMaxBlockThreads = 1024;
/// Dynamic shared memory per block on the host backend. Generous compared with a GPU's ~227 KiB
/// so that code tuned for the GPU runs unchanged, small enough that a typo in shared_bytes
/// fails loudly instead of allocating gigabytes per launch.
constexpr std::size_t kMaxHostSharedBytes = std::size_t{1} << 20;

}  // namespace

void check_launch_dims(const LaunchDims& dims, bool host) {
  GNIO_REQUIRE(dims.grid >= 1, "gnio::launch: grid of %u blocks; a launch needs at least one block",
               dims.grid);
  GNIO_REQUIRE(dims.block >= 1 && dims.block <= kMaxBlockThreads,
               "gnio::launch: block of %u threads; a block holds 1 to %u threads", dims.block,
               kMaxBlockThreads);
  if (!host) return;  // the CUDA runtime checks the rest (shared memory per device, grid size)
  GNIO_REQUIRE(dims.shared_bytes <= kMaxHostSharedBytes,
               "gnio::launch: %zu bytes of shared memory per block; the host backend allows at "
               "most %zu",
               dims.shared_bytes, kMaxHostSharedBytes);
  // Every thread of a host launch is a CPU thread running at the same time as all the others.
  const long long limit = config_int("GNIO_HOST_MAX_THREADS");
  const unsigned long long threads = static_cast<unsigned long long>(dims.grid) * dims.block;
  GNIO_REQUIRE(limit > 0 && threads <= static_cast<unsigned long long>(limit),
               "gnio::launch: grid %u x block %u = %llu threads; host backend runs at most %lld "
               "threads per launch (GNIO_HOST_MAX_THREADS); use a smaller grid or block for host "
               "runs",
               dims.grid, dims.block, threads, limit);
}

void throw_launch_error_not_cuda() {
  fail(ErrorClass::Unsupported,
       "gnio::launch: a CUDA stream was given to a kernel launch in a file not compiled by nvcc; "
       "compile that file with nvcc (--extended-lambda for lambda kernels) or launch on a "
       "host-backend stream (GNIO_BACKEND=host)");
}

}  // namespace gnio::detail
