#include "gnio/version.hpp"

#include "platform/backend.hpp"

namespace gnio {

Version version() noexcept { return {GNIO_VERSION_MAJOR, GNIO_VERSION_MINOR, GNIO_VERSION_PATCH}; }

const char* version_string() noexcept { return GNIO_VERSION_STRING; }

BuildInfo build_info() noexcept {
#if defined(__clang__)
  static const char* compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  static const char* compiler = "gcc " __VERSION__;
#else
  static const char* compiler = "unknown";
#endif
  return {platform::cuda_backend_compiled(), GNIO_BUILD_CUDA_ARCHS, GNIO_BUILD_TYPE,
          GNIO_BUILD_SANITIZER, compiler};
}

}  // namespace gnio
