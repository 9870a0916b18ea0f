// gnio-perf rma: latency and bandwidth kernels at block scope (see rma_gnio_kernels.inl).
#define GNIO_PERF_COOP gnio::Block
#define GNIO_PERF_LAUNCH launch_rma_block
#include "rma_gnio_kernels.inl"
