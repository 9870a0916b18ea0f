// gnio::Channels: the set's memory and the host's stream operations. Compiled by nvcc when the
// cuda backend is built (its kernels run on GPUs), else by the C++ compiler (host streams only).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/fail.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/channel.hpp"
#include "gnio/launch.hpp"
#include "gnio/log.hpp"

namespace gnio {

namespace {

constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

/// The host's send/recv operations: block b runs operation b, with the whole block.
struct MessageKernel {
  DeviceChannels set;
  std::array<Channels::Op, Channels::kMaxGroup> ops;
  unsigned count;
  GNIO_HD_INLINE void operator()() const {
    const unsigned b = dev::block();
    if (b >= count) return;
    const Channels::Op& op = ops[b];
    const Channel ch = set.channel(op.peer, op.tag);
    if (op.is_send) {
      (void)send<Block>(ch, op.src, op.bytes);
      return;
    }
    const Received r = recv<Block>(ch, op.dst, op.bytes);
    if (op.received != nullptr && dev::thread() == 0) *op.received = r.bytes;
  }
};

}  // namespace

Channels::Channels(Comm& comm, const ChannelOptions& options) : comm_(comm), options_(options) {
  const ChannelOptions& o = options;
  GNIO_REQUIRE(o.tags >= 1 && o.tags <= 1024, "Channels: tags=%d is outside 1..1024", o.tags);
  GNIO_REQUIRE(o.depth >= 1 && o.depth <= 4096, "Channels: depth=%u is outside 1..4096", o.depth);
  GNIO_REQUIRE(o.max_message >= 1 && o.max_message <= (std::size_t{1} << 30),
               "Channels: max_message=%zu is outside 1 B..1 GiB", o.max_message);
  GNIO_REQUIRE(o.ll_max == ChannelOptions::kPacketsAuto || o.ll_max <= (std::size_t{1} << 20),
               "Channels: ll_max=%zu is outside 0..1 MiB", o.ll_max);
  // Every rank must build the same layout: compare the options before allocating anything.
  const std::array<std::uint64_t, 4> mine = {static_cast<std::uint64_t>(o.tags), o.depth,
                                             o.max_message, o.ll_max};
  std::vector<std::array<std::uint64_t, 4>> all(static_cast<std::size_t>(comm.size()));
  all[static_cast<std::size_t>(comm.rank())] = mine;
  comm.bootstrap().allgather(all.data(), sizeof(mine));
  for (int r = 0; r < comm.size(); ++r)
    GNIO_REQUIRE(all[static_cast<std::size_t>(r)] == mine,
                 "Channels: rank %d asked for tags=%llu depth=%llu max_message=%llu ll_max=%llu, "
                 "rank %d for tags=%d depth=%u max_message=%zu ll_max=%zu: every rank must pass "
                 "the same options",
                 r, static_cast<unsigned long long>(all[static_cast<std::size_t>(r)][0]),
                 static_cast<unsigned long long>(all[static_cast<std::size_t>(r)][1]),
                 static_cast<unsigned long long>(all[static_cast<std::size_t>(r)][2]),
                 static_cast<unsigned long long>(all[static_cast<std::size_t>(r)][3]), comm.rank(),
                 o.tags, o.depth, o.max_message, o.ll_max);

  const std::uint64_t pairs = static_cast<std::uint64_t>(comm.size()) * o.tags;
  // A power of two: the kernels index their rings with a mask, not a 64-bit remainder (a call on
  // every message's path).
  const std::uint32_t depth = std::bit_ceil(o.depth);
  const std::uint64_t slots = pairs * depth;
  const std::uint64_t slot_bytes = round_up(o.max_message, 256);
  const std::uint64_t ll_asked = o.ll_max != ChannelOptions::kPacketsAuto ? o.ll_max
                                 : comm.backend() == Backend::Cuda ? ChannelOptions::kPacketsOnGpu
                                                                   : ChannelOptions::kPacketsOnHost;
  const std::uint64_t ll_max = std::min<std::uint64_t>(ll_asked, o.max_message);
  options_.ll_max = ll_max;  // options() reports what is in effect, not kPacketsAuto
  const std::uint64_t ll_cells = (ll_max + 3) / 4;
  // Counters and packet cells first (cleared together: a cell from before must never carry a
  // sequence number in use), then the rings.
  const std::uint64_t flags_at = 0;
  const std::uint64_t credits_at = flags_at + slots * 8;
  const std::uint64_t sent_at = credits_at + pairs * 8;
  const std::uint64_t consumed_at = sent_at + pairs * 8;
  const std::uint64_t ll_at = round_up(consumed_at + pairs * 8, 256);
  const std::uint64_t rings_at = round_up(ll_at + slots * ll_cells * 8, 256);
  memory_ = comm.alloc_bytes(rings_at + slots * slot_bytes);
  open_ = true;

  Stream stream(comm);
  comm.fill(comm.local_address(memory_), 0, rings_at, stream);
  comm.synchronize(stream);
  // No peer may signal into these counters before this rank cleared them.
  comm.bootstrap().barrier();

  device_.comm = comm.device_handle();
  device_.rings = memory_.byte_offset<char>(rings_at);
  device_.flags = memory_.byte_offset<std::uint64_t>(flags_at);
  device_.credits = memory_.byte_offset<std::uint64_t>(credits_at);
  device_.sent = memory_.byte_offset<std::uint64_t>(sent_at);
  device_.consumed = memory_.byte_offset<std::uint64_t>(consumed_at);
  device_.ll = memory_.byte_offset<std::uint64_t>(ll_at);
  device_.ll_max = ll_max;
  device_.ll_cells = ll_cells;
  device_.tags = o.tags;
  device_.depth = depth;
  device_.slot_bytes = slot_bytes;
  device_.max_message = o.max_message;
}

Channels::~Channels() {
  try {
    close();
  } catch (const Error& e) {
    GNIO_WARN(Device, "Channels: freeing the set's memory failed: %s", e.what());
  }
}

void Channels::close() {
  if (!open_) return;
  open_ = false;
  // An aborted communicator frees nothing more (its collective free would throw): the set's
  // memory goes with the heap when the communicator is destroyed.
  if (comm_.aborted()) return;
  comm_.free_bytes(memory_);
}

void Channels::send(const void* buf, std::size_t bytes, int peer, StreamRef stream, int tag) {
  queue(Op{buf, nullptr, bytes, nullptr, peer, tag, true}, stream);
}

void Channels::recv(void* buf, std::size_t capacity, int peer, StreamRef stream, int tag,
                    std::size_t* received) {
  queue(Op{nullptr, buf, capacity, received, peer, tag, false}, stream);
}

void Channels::queue(const Op& op, StreamRef stream) {
  char problem[160] = "";
  if (!open_)
    std::snprintf(problem, sizeof(problem), "the set is closed");
  else if (op.peer < 0 || op.peer >= comm_.size())
    std::snprintf(problem, sizeof(problem), "peer %d is outside 0..%d", op.peer, comm_.size() - 1);
  else if (op.tag < 0 || op.tag >= options_.tags)
    std::snprintf(problem, sizeof(problem), "tag %d is outside 0..%d", op.tag, options_.tags - 1);
  else if (op.bytes > 0 && (op.is_send ? op.src == nullptr : op.dst == nullptr))
    std::snprintf(problem, sizeof(problem), "%zu bytes at a null buffer", op.bytes);
  else if (grouping_ && group_.size() >= kMaxGroup)
    std::snprintf(problem, sizeof(problem), "a group holds at most %zu operations", kMaxGroup);
  if (problem[0] != '\0') {
    // A refused operation inside a group drops the whole group (nothing of it is queued): its
    // other operations were meant to run together with this one.
    const bool dropped = grouping_;
    grouping_ = false;
    group_.clear();
    fail(ErrorClass::InvalidArgument, "%s: %s%s", op.is_send ? "Channels::send" : "Channels::recv",
         problem, dropped ? " (the group is dropped)" : "");
  }
  if (grouping_) {
    group_.push_back(op);
    return;
  }
  launch(&op, 1, stream);
}

void Channels::group_start() {
  GNIO_REQUIRE(!grouping_, "Channels::group_start: a group is already open");
  grouping_ = true;
  group_.clear();
}

void Channels::group_end(StreamRef stream) {
  GNIO_REQUIRE(grouping_, "Channels::group_end: no group is open (group_start first)");
  grouping_ = false;
  if (!group_.empty()) launch(group_.data(), group_.size(), stream);
  group_.clear();
}

void Channels::launch(const Op* ops, std::size_t count, StreamRef stream) {
  MessageKernel k{};
  k.set = device_;
  k.set.comm = comm_.device_handle();  // the heap may have grown since the set was made
  std::memcpy(k.ops.data(), ops, count * sizeof(Op));
  k.count = static_cast<unsigned>(count);
  // A GPU block of 256 threads copies a slot at the link's speed; a host-backend block is one
  // CPU thread (its copy is one memcpy).
  gnio::launch(stream, {.grid = k.count, .block = stream.is_host() ? 1u : 256u}, k);
}

}  // namespace gnio
