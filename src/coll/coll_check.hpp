// GNIO_CHECK=1: the cross-rank comparison of every collective call's arguments before anything
// is enqueued. Each rank contributes a CheckRecord through the bootstrap; compare_records says
// what the ranks disagree on, check_alltoallv_pairs compares alltoallv's counts pairwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll/coll_request.hpp"
#include "core/comm_services.hpp"

namespace gnio::detail {

/// What one rank says about its call. Plain words of a fixed size, so that every call of every
/// kind exchanges the same bytes; the magic tells a record from whatever else a rank that is not
/// in a collective call may have sent in the same bootstrap exchange.
struct CheckRecord {
  std::uint64_t magic = 0;
  std::uint64_t seq = 0;    // 1-based number of this collective call on the communicator
  std::uint64_t count = 0;  // NCCL's count; alltoallv: unused (compared pairwise below)
  std::uint32_t kind = 0, type = 0, op = 0;
  std::int32_t root = 0;
  std::uint32_t valid = 0;  // 1 when the call passed this rank's own checks
  std::uint32_t pad = 0;
};
constexpr std::uint64_t kCheckMagic = 0x4b434843'4f494e47ull;  // "GNIOCHCK"

/// Everything the ranks' records disagree on, "; "-separated; empty when they agree.
std::string compare_records(const std::vector<CheckRecord>& all);

/// Alltoallv: rank r's send_counts[q] must equal rank q's recv_counts[r]; throws InvalidArgument
/// naming up to four pairs that differ. One more exchange (of the counts), made only when every
/// rank is in the same valid alltoallv call.
void check_alltoallv_pairs(const CommServices& core, const Request& r, const char* call);

}  // namespace gnio::detail
