# The host collectives' kernels (src/coll/coll_kernels.hpp): one generated translation unit per
# kernel set and group of algorithms, so that a build compiles them on every core at once (the
# largest, an fp8 set's LL + OneShot kernels, takes ~20 s of nvcc on one core).
#
# GNIO_COLL_KERNEL_SETS limits which sets are compiled (development builds): f32 f64 f16 bf16
# e4m3 e5m2 i32 i64 u8 (each element type with the arithmetic operators), bits (the bitwise
# operators, any integer type) and copy (allgather, broadcast, alltoall, alltoallv). A collective
# that needs a set left out fails with Error(Unsupported) before anything is enqueued.
set(GNIO_COLL_ALL_KERNEL_SETS f32 f64 f16 bf16 e4m3 e5m2 i32 i64 u8 bits copy)
set(GNIO_COLL_KERNEL_SETS "${GNIO_COLL_ALL_KERNEL_SETS}" CACHE STRING
    "Collective kernel sets to compile (a subset of: ${GNIO_COLL_ALL_KERNEL_SETS})")
foreach(set IN LISTS GNIO_COLL_KERNEL_SETS)
  if(NOT set IN_LIST GNIO_COLL_ALL_KERNEL_SETS)
    message(FATAL_ERROR "GNIO_COLL_KERNEL_SETS: '${set}' is not one of ${GNIO_COLL_ALL_KERNEL_SETS}")
  endif()
endforeach()

# Sets the variable `out` to the generated sources and tells coll_kernels.cpp which sets exist.
function(gnio_coll_kernel_sources out)
  # C++ names of the sets and algorithms; two algorithm groups of about equal compile time.
  set(cxx_f32 F32)
  set(cxx_f64 F64)
  set(cxx_f16 F16)
  set(cxx_bf16 BF16)
  set(cxx_e4m3 E4M3)
  set(cxx_e5m2 E5M2)
  set(cxx_i32 I32)
  set(cxx_i64 I64)
  set(cxx_u8 U8)
  set(cxx_bits Bits)
  set(cxx_copy Copy)
  set(group_ll_oneshot LL OneShot)
  set(group_twoshot_ring TwoShot Ring)
  if(GNIO_HAVE_CUDA)
    set(ext cu)
  else()
    set(ext cpp)
  endif()
  set(dir ${PROJECT_BINARY_DIR}/src/coll_kernels)
  set(sources)
  set(defs)
  # Every set's macro is defined, 1 or 0: coll_kernels.cpp reads them in a C++ expression, where
  # an undefined name would not compile.
  foreach(set IN LISTS GNIO_COLL_ALL_KERNEL_SETS)
    string(TOUPPER ${set} upper)
    if(set IN_LIST GNIO_COLL_KERNEL_SETS)
      list(APPEND defs GNIO_COLL_SET_${upper}=1)
    else()
      list(APPEND defs GNIO_COLL_SET_${upper}=0)
    endif()
  endforeach()
  foreach(set IN LISTS GNIO_COLL_KERNEL_SETS)
    foreach(group ll_oneshot twoshot_ring)
      set(GNIO_SET ${set})
      string(REPLACE ";" " and " GNIO_ALGOS_TEXT "${group_${group}}")
      set(GNIO_INSTANTIATIONS)
      foreach(algo IN LISTS group_${group})
        string(APPEND GNIO_INSTANTIATIONS
               "template void launch_set<KernelSet::${cxx_${set}}, CollAlgo::${algo}>(const CollLaunch&);\n")
      endforeach()
      set(file ${dir}/coll_kernels_${set}_${group}.${ext})
      configure_file(${PROJECT_SOURCE_DIR}/src/coll/coll_kernels.cu.in ${file} @ONLY)
      list(APPEND sources ${file})
    endforeach()
  endforeach()
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/coll/coll_kernels.cpp PROPERTIES
                              COMPILE_DEFINITIONS "${defs}")
  set(${out} ${sources} PARENT_SCOPE)
endfunction()
