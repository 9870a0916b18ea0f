// Internal helpers to build messages and throw gnio::Error.
#pragma once

#include <cstdarg>
#include <string>

#include "gnio/error.hpp"

namespace gnio {

/// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char* fmt, va_list ap);

/// Throws Error(cls) with a printf-style message (logged at WARN unless InvalidArgument).
[[noreturn]] void fail(ErrorClass cls, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Throws Error(SystemError) with the message, errno's text appended.
[[noreturn]] void fail_errno(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gnio

/// Rejects a bad argument before anything changed: throws InvalidArgument with the message.
#define GNIO_REQUIRE(cond, ...)                                      \
  do {                                                               \
    if (!(cond)) ::gnio::fail(::gnio::ErrorClass::InvalidArgument, __VA_ARGS__); \
  } while (0)

/// An invariant of gnio itself; a failure is a gnio bug.
#define GNIO_ASSERT(cond)                                                                  \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::gnio::fail(::gnio::ErrorClass::Internal, "%s:%d: assertion '%s' failed; please report this", \
                   __FILE__, __LINE__, #cond);                                             \
  } while (0)
