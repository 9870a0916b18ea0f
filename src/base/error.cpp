#include "gnio/error.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "base/fail.hpp"
#include "gnio/log.hpp"

namespace gnio {

std::string_view to_string(ErrorClass c) noexcept {
  switch (c) {
    case ErrorClass::InvalidArgument: return "InvalidArgument";
    case ErrorClass::Timeout: return "Timeout";
    case ErrorClass::RemoteError: return "RemoteError";
    case ErrorClass::SystemError: return "SystemError";
    case ErrorClass::Unsupported: return "Unsupported";
    case ErrorClass::Internal: return "Internal";
  }
  return "Unknown";
}

Error::Error(ErrorClass cls, const std::string& message)
    : std::runtime_error("gnio " + std::string(to_string(cls)) + ": " + message),
      cls_(cls),
      message_(message) {}

std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return fmt;
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

[[noreturn]] void fail(ErrorClass cls, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  // Invalid arguments are the caller's to handle; everything else is worth a line in the log.
  if (cls != ErrorClass::InvalidArgument)
    GNIO_WARN(Init, "%s: %s", std::string(to_string(cls)).c_str(), msg.c_str());
  throw Error(cls, msg);
}

}  // namespace gnio
