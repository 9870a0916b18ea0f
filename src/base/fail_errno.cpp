#include <cerrno>
#include <cstring>

#include "base/fail.hpp"

namespace gnio {

[[noreturn]] void fail_errno(const char* fmt, ...) {
  int err = errno;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  fail(ErrorClass::SystemError, "%s: %s (errno %d)", msg.c_str(), std::strerror(err), err);
}

}  // namespace gnio
