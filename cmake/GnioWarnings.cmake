# Warning and sanitizer flags shared by every gnio target.
add_library(gnio_build_flags INTERFACE)
target_compile_options(gnio_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>
  # GCC 12 at -O3 (Release) reports -Wrestrict inside libstdc++ for `"x" + std::string` (GCC bug
  # 105329, fixed in 13): a false positive that would fill the quick start's output.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers --extended-lambda --expt-relaxed-constexpr>)
if(GNIO_WERROR)
  target_compile_options(gnio_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
if(GNIO_SANITIZE STREQUAL "address")
  # ASan's instrumentation makes GCC 12 report maybe-uninitialized inside libstdc++ (std::regex,
  # std::function); those reports are false positives, and ASan itself checks the real thing.
  target_compile_options(gnio_build_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
    $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  target_link_options(gnio_build_flags INTERFACE -fsanitize=address,undefined)
elseif(GNIO_SANITIZE STREQUAL "thread")
  target_compile_options(gnio_build_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(gnio_build_flags INTERFACE -fsanitize=thread)
elseif(GNIO_SANITIZE)
  message(FATAL_ERROR "GNIO_SANITIZE must be address, thread or empty")
endif()
