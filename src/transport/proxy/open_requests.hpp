// The requests a proxy sent to its peers and whose answers have not come: gets (the answer brings
// the data) and updates (atomics, signals or staged puts the target's proxy applies: the answer
// says they took effect, with an atomic's old value). Every network backend matches answers here:
// one is used only when it answers an open request of this rank, from the peer asked, of the kind
// and with the data size asked; anything else is refused whole, so a stray or forged answer
// writes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace gnio::proxy {

/// What an answer brings.
enum class RequestKind : std::uint32_t {
  Get,     ///< data
  Update,  ///< word(s) applied (an atomic's old value)
};

/// One request waiting for its answer.
struct OpenRequest {
  int peer = -1;
  RequestKind kind = RequestKind::Update;
  std::uint64_t answer_bytes = 0;  ///< data the answer must bring (a get's size)
  std::uint64_t where = 0;         ///< the backend's: where the answer goes
};

/// A request whose answer was used: its ticket and the peer that answered.
struct AnsweredRequest {
  std::uint64_t ticket = 0;
  int peer = -1;
};

/// Open requests by (ticket, part): a ticket's request may go in parts (a staged get's chunks),
/// each answered on its own. Safe to use from several threads.
class OpenRequests {
 public:
  /// Opens part `part` of ticket `ticket`'s request (before it is sent).
  void open(std::uint64_t ticket, std::uint64_t part, const OpenRequest& request) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_[{ticket, part}] = request;
  }
  /// Takes the open request (ticket, part) if `peer` was asked, it is of `kind` and its answer
  /// brings `answer_bytes`; nothing (and nothing is taken) otherwise.
  std::optional<OpenRequest> take(std::uint64_t ticket, std::uint64_t part, int peer,
                                  RequestKind kind, std::uint64_t answer_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = open_.find({ticket, part});
    if (it == open_.end() || it->second.peer != peer || it->second.kind != kind ||
        it->second.answer_bytes != answer_bytes)
      return std::nullopt;
    const OpenRequest request = it->second;
    open_.erase(it);
    return request;
  }
  /// Records that ticket `ticket`'s answer from `peer` was used (its effect is in place), for the
  /// thread that finishes tickets (answered()).
  void answered(std::uint64_t ticket, int peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    answered_.push_back(AnsweredRequest{ticket, peer});
  }
  /// The requests answered since the last call, in the order they were.
  std::vector<AnsweredRequest> answered() {
    std::vector<AnsweredRequest> requests;
    std::lock_guard<std::mutex> lock(mutex_);
    requests.swap(answered_);
    return requests;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, OpenRequest> open_;
  std::vector<AnsweredRequest> answered_;
};

}  // namespace gnio::proxy
