// A communicator's teams: how one is built from its world ranks (CommImpl::make_team, collective)
// and gnio::Comm's team members (world, node_team, split, split_strided).
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/fail.hpp"
#include "core/comm_impl.hpp"
#include "gnio/comm.hpp"

namespace gnio {

namespace detail {

Team CommImpl::make_team(const std::vector<int>& members) {
  Team t;
  t.id = next_team_id++;
  t.size = static_cast<int>(members.size());
  auto me = std::find(members.begin(), members.end(), bootstrap->rank());
  t.index = me == members.end() ? -1 : static_cast<int>(me - members.begin());
  bool strided = members.size() <= 1 || members[1] > members[0];
  for (std::size_t i = 2; strided && i < members.size(); ++i)
    strided = members[i] - members[i - 1] == members[1] - members[0];
  // Every rank allocates (the heap is collective) even when it is not a member. One allocation
  // (each is an allgather over the job): the epoch, on a line of its own, then the flags peers
  // write, then the member table of a team that is not strided.
  constexpr std::uint64_t kLine = 256;
  const std::uint64_t flags_bytes =
      sizeof(std::uint64_t) * std::max<std::size_t>(members.size(), 1);
  const std::uint64_t table_at = kLine + (flags_bytes + kLine - 1) / kLine * kLine;
  const SymPtr<char> block =
      alloc_internal(table_at + (strided ? 0 : sizeof(int) * members.size()));
  t.sync_epoch = block.cast<std::uint64_t>();
  t.sync_flags = block.byte_offset(kLine).cast<std::uint64_t>();
  if (strided) {
    t.start = members.empty() ? 0 : members[0];
    t.stride = members.size() > 1 ? members[1] - members[0] : 1;
  } else {
    const SymPtr<int> table = block.byte_offset(table_at).cast<int>();
    int* local_table = reinterpret_cast<int*>(heap->local_base() + table.offset);
    backend->copy(local_table, members.data(), sizeof(int) * members.size(), internal_stream());
    backend->stream_synchronize(internal_stream());
    t.stride = 0;
    t.members_table = local_table;
    t.host_members_table = team_tables.emplace_back(members).data();
  }
  // Flags must be clear everywhere before any member can write into a peer's copy.
  bootstrap->barrier();
  return t;
}

}  // namespace detail

const Team& Comm::world() const noexcept {
  return impl_->world;
}
const Team& Comm::node_team() const noexcept {
  return impl_->node_team;
}

Team Comm::split(const Team& parent, int color, int key) {
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->record(detail::host_op(detail::FlightEvent::Split));
  struct Entry {
    std::int32_t color, key, parent_index, rank;
  };
  const int size = impl_->bootstrap->size();
  std::vector<Entry> all(size);
  all[rank()] = {parent.contains_me() ? color : -1, key, parent.index, rank()};
  impl_->bootstrap->allgather(all.data(), sizeof(Entry));
  std::vector<Entry> mine;
  if (color >= 0 && parent.contains_me())
    for (const Entry& e : all)
      if (e.color == color && e.parent_index >= 0) mine.push_back(e);
  std::sort(mine.begin(), mine.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.parent_index < b.parent_index;
  });
  // Teams are created in the same order everywhere: one per distinct color, ascending.
  std::vector<int> colors;
  for (const Entry& e : all)
    if (e.color >= 0 && e.parent_index >= 0 &&
        std::find(colors.begin(), colors.end(), e.color) == colors.end())
      colors.push_back(e.color);
  std::sort(colors.begin(), colors.end());
  Team result;
  result.index = -1;
  for (int c : colors) {
    std::vector<Entry> members;
    for (const Entry& e : all)
      if (e.color == c && e.parent_index >= 0) members.push_back(e);
    std::sort(members.begin(), members.end(), [](const Entry& a, const Entry& b) {
      return a.key != b.key ? a.key < b.key : a.parent_index < b.parent_index;
    });
    std::vector<int> ranks;
    for (const Entry& e : members) ranks.push_back(e.rank);
    Team t = impl_->make_team(ranks);
    if (c == color && parent.contains_me()) result = t;
  }
  return result;
}

Team Comm::split_strided(const Team& parent, int start, int stride, int size) {
  GNIO_REQUIRE(start >= 0 && stride >= 1 && size >= 1 && start + (size - 1) * stride < parent.size,
               "split_strided: start %d, stride %d, size %d do not fit a team of %d", start, stride,
               size, parent.size);
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->record(detail::host_op(detail::FlightEvent::Split));
  std::vector<int> ranks;
  for (int i = 0; i < size; ++i) ranks.push_back(parent.world_rank(start + i * stride));
  return impl_->make_team(ranks);
}

}  // namespace gnio
