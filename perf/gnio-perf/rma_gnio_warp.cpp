// gnio-perf rma: latency and bandwidth kernels at warp scope (see rma_gnio_kernels.inl).
#define GNIO_PERF_COOP gnio::Warp
#define GNIO_PERF_LAUNCH launch_rma_warp
#include "rma_gnio_kernels.inl"
