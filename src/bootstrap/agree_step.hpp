// Steps every rank of a communicator takes together: each rank does its local part (allocate,
// map, connect), then all learn whether it failed anywhere, so that they undo and throw together
// instead of leaving peers waiting in the next collective. Used by the memory layer and the
// transports during setup.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace gnio {

/// One rank's failed local step, as every rank learns it from share_outcome().
struct StepFailure {
  int rank = -1;
  ErrorClass cls = ErrorClass::Internal;
  std::string message;
};

/// Collective over all ranks of `bootstrap`: every rank says whether its local step succeeded
/// (`local` is null) or failed (the exception it caught), and learns the failures of all ranks
/// (empty when every rank succeeded). Lets ranks undo and throw together instead of leaving
/// peers waiting in the next collective.
std::vector<StepFailure> share_outcome(Bootstrap& bootstrap, const std::exception_ptr& local);

/// Throws for a step that failed somewhere: this rank's own exception when it failed, else an
/// Error naming the first failing rank and its message. The class is the failures' class when
/// all share one (so an InvalidArgument anywhere is an InvalidArgument everywhere), else
/// RemoteError.
[[noreturn]] void throw_step_failure(const std::vector<StepFailure>& failures,
                                     const std::exception_ptr& local, int rank, const char* step);

/// share_outcome(); when any rank failed, runs `undo` (which must not throw) and then
/// throw_step_failure().
void agree_step(Bootstrap& bootstrap, const std::exception_ptr& local, const char* step,
                const std::function<void()>& undo = {});

/// "0, 3, 7": ranks for an error message.
std::string list_ranks(const std::vector<int>& ranks);

}  // namespace gnio
