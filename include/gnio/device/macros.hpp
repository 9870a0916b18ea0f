// Portability macros for code that runs on the GPU (cuda backend) and on CPU threads (host
// backend). Device-API headers include only this and other headers under gnio/device/.
#pragma once

#if defined(__CUDACC__)
#define GNIO_HD __host__ __device__
#define GNIO_DEVICE __device__
#define GNIO_HD_INLINE __host__ __device__ __forceinline__
/// For cold paths (error reporting): kept out of line so hot call sites stay small.
#define GNIO_NOINLINE __noinline__
#else
#define GNIO_HD
#define GNIO_DEVICE
#define GNIO_HD_INLINE inline __attribute__((always_inline))
#define GNIO_NOINLINE __attribute__((noinline))
#endif

// True in the device compilation pass of nvcc; false in its host pass and under g++/clang.
#if defined(__CUDA_ARCH__)
#define GNIO_ON_DEVICE 1
#else
#define GNIO_ON_DEVICE 0
#endif

// Unrolls the loop that follows in device code, so that its loads are issued together.
// GNIO_NO_UNROLL keeps the loop that follows rolled: cold code that every kernel carries.
#if GNIO_ON_DEVICE
#define GNIO_UNROLL _Pragma("unroll")
#define GNIO_NO_UNROLL _Pragma("unroll 1")
#else
#define GNIO_UNROLL
#define GNIO_NO_UNROLL
#endif

// Defined in a ThreadSanitizer build (gcc's and clang's spellings), where host code tells the
// sanitizer what it cannot see (fences, the order a socket gives between processes).
#if defined(__SANITIZE_THREAD__)
#define GNIO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GNIO_TSAN 1
#endif
#endif
