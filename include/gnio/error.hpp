// gnio's single error type. Every failure a gnio call reports is a gnio::Error with a class that
// tells the caller what is still safe to do afterwards.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gnio {

/// What kind of failure an Error reports, and therefore what the caller may do next.
enum class ErrorClass {
  /// A bad argument. The call had no effect; the communicator is still fully usable.
  InvalidArgument,
  /// A bounded wait expired (bootstrap, device wait, proxy). The message names who stalled.
  Timeout,
  /// A peer failed: it exited, was killed, or its link broke. The message names the rank.
  RemoteError,
  /// A system call or the CUDA driver/runtime failed.
  SystemError,
  /// The request is valid but this build, backend or transport cannot do it.
  Unsupported,
  /// A gnio bug: an invariant did not hold. Please report it.
  Internal,
};

/// Name of an error class as printed in messages ("InvalidArgument", ...).
std::string_view to_string(ErrorClass c) noexcept;

/// The exception every gnio call throws. `what()` says what failed, where, on which rank, and
/// what to do about it.
class Error : public std::runtime_error {
 public:
  Error(ErrorClass cls, const std::string& message);

  /// The class of this failure.
  ErrorClass error_class() const noexcept { return cls_; }
  /// The message without the "gnio <Class>: " prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorClass cls_;
  std::string message_;
};

}  // namespace gnio
