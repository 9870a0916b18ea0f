#include "platform/backend.hpp"

namespace gnio::platform {

const char* to_string(BackendKind k) noexcept { return k == BackendKind::Cuda ? "cuda" : "host"; }

}  // namespace gnio::platform
