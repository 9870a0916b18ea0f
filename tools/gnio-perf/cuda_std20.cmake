# CMake before 3.26 does not know how to ask nvcc for C++20 and refuses to generate CUDA targets
# whose CUDA_STANDARD is 20 (gnio sets CMAKE_CUDA_STANDARD 20 for the whole project). nvcc 12+
# takes -std=c++20, so tell this directory's generator so. Directory scope: include it in every
# CMakeLists.txt that creates CUDA targets.
if(GNIO_HAVE_CUDA AND NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION
   AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
