#include "bootstrap/agree_step.hpp"

#include <cstdint>
#include <cstring>

#include "base/fail.hpp"

namespace gnio {
namespace {

/// What share_outcome() sends: -1 = success, else the ErrorClass and the start of the message.
struct OutcomeCard {
  std::int32_t cls;
  std::uint32_t pad;
  char message[248];
};

}  // namespace

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::vector<StepFailure> share_outcome(Bootstrap& bootstrap, const std::exception_ptr& local) {
  std::vector<OutcomeCard> cards(bootstrap.size());
  OutcomeCard& mine = cards[bootstrap.rank()];
  std::memset(&mine, 0, sizeof(mine));
  mine.cls = -1;
  if (local) {
    std::string what;
    try {
      std::rethrow_exception(local);
    } catch (const Error& e) {
      mine.cls = static_cast<std::int32_t>(e.error_class());
      what = e.message();
    } catch (const std::exception& e) {
      mine.cls = static_cast<std::int32_t>(ErrorClass::Internal);
      what = e.what();
    } catch (...) {
      mine.cls = static_cast<std::int32_t>(ErrorClass::Internal);
      what = "unknown exception";
    }
    std::strncpy(mine.message, what.c_str(), sizeof(mine.message) - 1);
  }
  bootstrap.allgather(cards.data(), sizeof(OutcomeCard));
  std::vector<StepFailure> failures;
  for (int r = 0; r < bootstrap.size(); ++r)
    if (cards[r].cls >= 0)
      failures.push_back(StepFailure{
          r, static_cast<ErrorClass>(cards[r].cls),
          std::string(cards[r].message, strnlen(cards[r].message, sizeof(cards[r].message)))});
  return failures;
}

void throw_step_failure(const std::vector<StepFailure>& failures, const std::exception_ptr& local,
                        int rank, const char* step) {
  if (local) std::rethrow_exception(local);
  GNIO_ASSERT(!failures.empty());
  ErrorClass cls = failures[0].cls;
  std::vector<int> ranks;
  for (const StepFailure& f : failures) {
    if (f.cls != cls) cls = ErrorClass::RemoteError;
    ranks.push_back(f.rank);
  }
  fail(cls, "rank %d: %s failed on rank%s %s, so it was undone everywhere: %s", rank, step,
       ranks.size() > 1 ? "s" : "", list_ranks(ranks).c_str(), failures[0].message.c_str());
}

void agree_step(Bootstrap& bootstrap, const std::exception_ptr& local, const char* step,
                const std::function<void()>& undo) {
  std::vector<StepFailure> failures = share_outcome(bootstrap, local);
  if (failures.empty()) return;
  if (undo) undo();
  throw_step_failure(failures, local, bootstrap.rank(), step);
}

}  // namespace gnio
