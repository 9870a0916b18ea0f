#include "coll/coll_check.hpp"

#include <algorithm>
#include <map>

#include "base/fail.hpp"
#include "gnio/rank_ranges.hpp"

namespace gnio::detail {
namespace {

/// Groups ranks by the value `value_of` gives and describes the disagreement, the largest group
/// last ("rank 1 passed count 1000, ranks 0,2,3 passed 999"); empty when every rank agrees.
template <class F>
std::string disagreement(const std::vector<int>& ranks, const char* verb, F&& value_of) {
  std::map<std::string, std::vector<int>> groups;
  for (int r : ranks) groups[value_of(r)].push_back(r);
  if (groups.size() < 2) return "";
  std::vector<std::pair<std::string, std::vector<int>>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() < b.second.size();
    return a.second.front() < b.second.front();
  });
  std::string s;
  for (const auto& [value, members] : ordered) {
    if (!s.empty()) s += ", ";
    s += (members.size() == 1 ? "rank " : "ranks ") + rank_ranges(members) + " " + verb + " " +
         value;
  }
  return s;
}

std::string type_name(std::uint32_t t) {
  return t < static_cast<std::uint32_t>(kDataTypeCount) ? to_string(static_cast<DataType>(t))
                                                        : "type " + std::to_string(t);
}
std::string op_name(std::uint32_t op) {
  return op < static_cast<std::uint32_t>(kRedOpCount) ? to_string(static_cast<RedOp>(op))
                                                      : "operator " + std::to_string(op);
}

}  // namespace

std::string compare_records(const std::vector<CheckRecord>& all) {
  const int n = static_cast<int>(all.size());
  std::vector<int> ranks;
  std::vector<std::string> problems;
  std::vector<int> strangers, rejected;
  for (int q = 0; q < n; ++q) (all[q].magic == kCheckMagic ? ranks : strangers).push_back(q);
  if (!strangers.empty())
    problems.push_back((strangers.size() == 1 ? "rank " : "ranks ") + rank_ranges(strangers) +
                       " took part in this exchange from outside a collective call (another "
                       "bootstrap exchange, or a rank without GNIO_CHECK=1)");
  auto add = [&](std::string s) {
    if (!s.empty()) problems.push_back(std::move(s));
  };
  add(disagreement(ranks, "is at collective",
                   [&](int q) { return "#" + std::to_string(all[q].seq); }));
  const std::string kinds = disagreement(ranks, "called", [&](int q) {
    return std::string(to_string(static_cast<CollKind>(all[q].kind)));
  });
  if (!kinds.empty()) {
    // The other fields mean different things for different collectives.
    problems.push_back(kinds + " (did a rank skip or add a collective call?)");
  } else if (!ranks.empty()) {
    const CollKind k = static_cast<CollKind>(all[ranks.front()].kind);
    add(disagreement(ranks, "passed", [&](int q) { return type_name(all[q].type); }));
    if (k != CollKind::AllToAllV)
      add(disagreement(ranks, "passed count", [&](int q) { return std::to_string(all[q].count); }));
    if (reducing(k)) add(disagreement(ranks, "passed", [&](int q) { return op_name(all[q].op); }));
    if (k == CollKind::Broadcast || k == CollKind::Reduce)
      add(disagreement(ranks, "passed root", [&](int q) { return std::to_string(all[q].root); }));
  }
  for (int q : ranks)
    if (!all[q].valid) rejected.push_back(q);
  if (!rejected.empty())
    problems.push_back((rejected.size() == 1 ? "rank " : "ranks ") + rank_ranges(rejected) +
                       " rejected " + (rejected.size() == 1 ? "its" : "their") +
                       " own arguments (its error says why)");
  std::string s;
  for (const std::string& p : problems) s += (s.empty() ? "" : "; ") + p;
  return s;
}

void check_alltoallv_pairs(const CommServices& core, const Request& r, const char* call) {
  const int n = core.comm().size(), me = core.comm().rank();
  const std::size_t nn = static_cast<std::size_t>(n);
  std::vector<std::uint64_t> counts(2 * nn * nn);
  std::uint64_t* mine = counts.data() + 2 * nn * static_cast<std::size_t>(me);
  for (std::size_t q = 0; q < nn; ++q) {
    mine[q] = r.a2av[0][q];
    mine[nn + q] = r.a2av[2][q];
  }
  core.allgather(counts.data(), 2 * nn * sizeof(std::uint64_t));
  std::string s;
  int shown = 0, found = 0;
  for (int from = 0; from < n; ++from)
    for (int to = 0; to < n; ++to) {
      const std::uint64_t sent =
          counts[2 * nn * static_cast<std::size_t>(from) + static_cast<std::size_t>(to)];
      const std::uint64_t expected =
          counts[2 * nn * static_cast<std::size_t>(to) + nn + static_cast<std::size_t>(from)];
      if (sent == expected) continue;
      ++found;
      if (shown++ < 4)
        s += format("%srank %d sends %llu elements to rank %d, which expects %llu from it",
                    s.empty() ? "" : "; ", from, static_cast<unsigned long long>(sent), to,
                    static_cast<unsigned long long>(expected));
    }
  if (found > shown) s += format(" (and %d more pairs)", found - shown);
  if (!s.empty())
    fail(ErrorClass::InvalidArgument,
         "rank %d: %s: %s; nothing was enqueued on any rank (GNIO_CHECK=1)", me, call, s.c_str());
}

}  // namespace gnio::detail
