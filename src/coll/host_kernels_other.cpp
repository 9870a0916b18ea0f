// Without the cuda backend the kernel translation units are plain C++: compile them here, in two
// units that build in parallel (with the cuda backend, CMake compiles the .cu files with nvcc).
#if !defined(GNIO_HAVE_CUDA)
#include "coll/kernels_copy.cu"
#include "coll/kernels_fp8.cu"
#include "coll/kernels_int.cu"
#endif
