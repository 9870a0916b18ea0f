// gnio-perf rma: latency and bandwidth kernels at thread scope (see rma_gnio_kernels.inl).
#define GNIO_PERF_COOP gnio::Thread
#define GNIO_PERF_LAUNCH launch_rma_thread
#include "rma_gnio_kernels.inl"
