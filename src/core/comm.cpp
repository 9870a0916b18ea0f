#include "gnio/comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <thread>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "core/comm_impl.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio {

const char* to_string(Backend b) noexcept {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Cuda: return "cuda";
    case Backend::Host: return "host";
  }
  return "?";
}

namespace detail {
namespace {

/// What every rank tells every other at creation.
struct RankCard {
  char node_id[112];
  std::int32_t backend;
  std::int32_t device;
  std::uint32_t heap_id;  // rank 0's proposal is used
  std::uint32_t pad;
};

std::string default_node_id() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot.substr(0, 8);
}

Backend resolve_backend(const CommOptions& options) {
  Backend b = options.backend;
  if (b == Backend::Auto) {
    std::string env = config_text("GNIO_BACKEND");
    if (env == "cuda")
      b = Backend::Cuda;
    else if (env == "host")
      b = Backend::Host;
    else if (env != "auto")
      fail(ErrorClass::InvalidArgument, "GNIO_BACKEND='%s' is not one of auto, cuda, host",
           env.c_str());
  }
  if (b == Backend::Auto) b = platform::cuda_device_count() > 0 ? Backend::Cuda : Backend::Host;
  return b;
}

/// GNIO_FLIGHT_RECORDER, checked before the ring is allocated.
std::size_t flight_capacity() {
  const long long n = config_int("GNIO_FLIGHT_RECORDER");
  constexpr long long kMax = 1 << 20;
  GNIO_REQUIRE(n >= 0 && n <= kMax,
               "GNIO_FLIGHT_RECORDER=%lld: the number of recorded operations must be in [0, %lld] "
               "(0 = off)",
               n, kMax);
  return static_cast<std::size_t>(n);
}

/// A flight-recorder entry of a collective host operation of `bytes`.
FlightEntry host_op(FlightEvent event, std::uint64_t bytes = 0) {
  FlightEntry e;
  e.event = event;
  e.count = bytes;
  return e;
}

}  // namespace

CommImpl::CommImpl(std::unique_ptr<Bootstrap> bs, LaunchInfo launch, const CommOptions& options)
    : info(std::move(launch)), bootstrap(std::move(bs)), flight(flight_capacity()) {
  const int rank = bootstrap->rank();
  const int size = bootstrap->size();
  set_log_rank(rank);
  // Milliseconds each step of creation took (logged at the end: how creation grows with the job).
  using Clock = std::chrono::steady_clock;
  Clock::time_point step_start = Clock::now();
  auto lap = [&step_start] {
    const Clock::time_point now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - step_start).count();
    step_start = now;
    return ms;
  };
  timeout_s = config_seconds("GNIO_TIMEOUT");
  flight_dir = config_text("GNIO_FLIGHT_RECORDER_DIR");

  // Who is on which node, and does everyone agree on the backend?
  backend_kind = resolve_backend(options);
  node_id = config_text("GNIO_NODE_ID");
  if (node_id.empty()) node_id = default_node_id();
  std::vector<RankCard> cards(size);
  RankCard& mine = cards[rank];
  std::memset(&mine, 0, sizeof(mine));
  std::strncpy(mine.node_id, node_id.c_str(), sizeof(mine.node_id) - 1);
  mine.backend = static_cast<std::int32_t>(backend_kind);
  mine.heap_id = static_cast<std::uint32_t>(std::random_device{}()) | 1u;
  bootstrap->allgather(cards.data(), sizeof(RankCard));
  const double cards_ms = lap();
  heap_id = cards[0].heap_id;
  std::vector<std::string> node_names;
  node_of_rank.resize(size);
  for (int r = 0; r < size; ++r) {
    std::string id(cards[r].node_id, strnlen(cards[r].node_id, sizeof(cards[r].node_id)));
    auto it = std::find(node_names.begin(), node_names.end(), id);
    node_of_rank[r] = static_cast<int>(it - node_names.begin());
    if (it == node_names.end()) node_names.push_back(id);
  }
  nodes = static_cast<int>(node_names.size());
  node = node_of_rank[rank];
  for (int r = 0; r < size; ++r)
    if (node_of_rank[r] == node) node_ranks.push_back(r);
  local_rank =
      static_cast<int>(std::find(node_ranks.begin(), node_ranks.end(), rank) - node_ranks.begin());
  for (int r : node_ranks)
    if (cards[r].backend != mine.backend)
      fail(ErrorClass::InvalidArgument,
           "rank %d uses the %s backend but rank %d on the same node uses %s; set GNIO_BACKEND "
           "the same way for every rank",
           rank, to_string(backend_kind), r, to_string(static_cast<Backend>(cards[r].backend)));

  // The platform backend: the GPU follows the launcher's local rank when it gave one.
  if (backend_kind == Backend::Cuda) {
    int count = platform::cuda_device_count();
    if (count == 0)
      fail(
          ErrorClass::Unsupported,
          "rank %d: GNIO_BACKEND=cuda but no usable GPU is visible (CUDA_VISIBLE_DEVICES, driver); "
          "use GNIO_BACKEND=host to run on CPUs",
          rank);
    long long dev = options.device >= 0 ? options.device : config_int("GNIO_DEVICE");
    // Simulated nodes (gnio-run --nodes) share this machine's GPUs: index by machine, not node.
    const long long machine_rank = config_int("GNIO_MACHINE_LOCAL_RANK");
    if (dev < 0 && machine_rank >= 0) dev = machine_rank % count;
    if (dev < 0) dev = (info.local_rank >= 0 ? info.local_rank : local_rank) % count;
    GNIO_REQUIRE(dev < count, "rank %d: GPU %lld requested (GNIO_DEVICE) but only %d are visible",
                 rank, dev, count);
    backend = platform::make_cuda_backend(static_cast<int>(dev));
  } else {
    backend = platform::make_host_backend();
  }
  backend->create_stream(&cuda_stream, &host_stream);
  control = static_cast<DeviceControl*>(backend->alloc_host_mapped(sizeof(DeviceControl)));
  const double backend_ms = lap();

  // The symmetric heap, mapped by every rank of the node.
  // Each communicator gets its own fd-exchange namespace (abstract sockets are named by token), so
  // several communicators of one job can live side by side.
  fds = std::make_unique<FdExchange>(
      *bootstrap, node_ranks,
      bootstrap->token() ^ (std::uint64_t{heap_id} * 0x9E3779B97F4A7C15ull));
  HeapConfig hc{config_size("GNIO_HEAP_SIZE"), config_size("GNIO_HEAP_CHUNK"),
                config_size("GNIO_HEAP_MAX"), config_text("GNIO_MEM_MAP")};
  GNIO_REQUIRE(hc.chunk > 0, "GNIO_HEAP_CHUNK must be positive");
  heap = std::make_unique<SymmetricHeap>(*backend, *bootstrap, *fds, node_ranks, local_rank, hc);
  const double heap_ms = lap();

  // Internal tables: the node-local index of every rank (only read when node ranks are not
  // contiguous), and the world and node teams.
  std::vector<std::int16_t> local_index(size, -1);
  for (std::size_t i = 0; i < node_ranks.size(); ++i)
    local_index[node_ranks[i]] = static_cast<std::int16_t>(i);
  // Both in one allocation (each is an allgather over the job): the stall claim word, then the
  // table.
  const SymPtr<char> tables = alloc_internal(8 + sizeof(std::int16_t) * size);
  stall_claim = tables.cast<std::uint32_t>();
  local_index_table = tables.byte_offset(8).cast<std::int16_t>();
  backend->copy(heap->local_base() + local_index_table.offset, local_index.data(),
                sizeof(std::int16_t) * size, internal_stream());
  backend->stream_synchronize(internal_stream());
  std::vector<int> all(size);
  for (int r = 0; r < size; ++r) all[r] = r;
  world = make_team(all);
  node_team = make_team(node_ranks);
  const double tables_ms = lap();

  // The network transport (collective: every rank joins the mesh).
  const std::string net = config_text("GNIO_NET");
  if (net != "auto" && net != "tcp" && net != "ucx" && net != "none")
    fail(ErrorClass::InvalidArgument, "GNIO_NET='%s' is not one of auto, tcp, ucx, none",
         net.c_str());
  if (nodes > 1 && net != "none")
    proxy = proxy::make_proxy(net, *backend, *bootstrap, node_of_rank, heap->local_base(),
                              heap->mapped(), control, internal_stream(), timeout_s,
                              [this](int r) { on_link_lost(r); });
  const double network_ms = lap();

  // Last, so a failure above leaves no watcher to say goodbye for a rank that never got here.
  const double heartbeat_s = config_seconds("GNIO_HEARTBEAT_INTERVAL");
  if (heartbeat_s > 0 && size > 1) {
    bootstrap::LivenessOptions lo;
    lo.fanout = static_cast<int>(config_int("GNIO_LIVENESS_FANOUT"));
    lo.interval_s = heartbeat_s;
    // Silence is declared after ten missed heartbeats, but never later than GNIO_TIMEOUT (a cut
    // network must be reported before device waits would give up on their own) and never sooner
    // than kMinSilence: a live rank whose watcher thread is starved on a loaded machine
    // (sanitizers, oversubscribed CPUs) must not be declared dead. A killed rank is seen at once
    // regardless: its connection closes.
    constexpr double kMinSilence = 3.0;
    lo.silence_s = std::max(10 * heartbeat_s, kMinSilence);
    if (timeout_s > 0) lo.silence_s = std::min(lo.silence_s, std::max(timeout_s, kMinSilence));
    lo.connect_s = config_seconds("GNIO_BOOTSTRAP_TIMEOUT");
    if (lo.connect_s <= 0) lo.connect_s = 1e9;
    liveness = std::make_unique<bootstrap::LivenessWatcher>(
        *bootstrap, lo, [this](int r, const std::string& what) { on_peer_lost(r, what); });
  }
  const double liveness_ms = lap();
  GNIO_INFO(Init, "rank %d/%d: node %d/%d (%s), local rank %d/%zu, backend %s, %s", rank, size,
            node, nodes, node_id.c_str(), local_rank, node_ranks.size(), to_string(backend_kind),
            backend->describe().c_str());
  GNIO_INFO(Init,
            "rank %d: created in %.2f ms: rank cards %.2f, backend %.2f, heap %.2f, tables and "
            "teams %.2f, network %.2f, liveness %.2f",
            rank, cards_ms + backend_ms + heap_ms + tables_ms + network_ms + liveness_ms, cards_ms,
            backend_ms, heap_ms, tables_ms, network_ms, liveness_ms);
}

CommImpl::~CommImpl() {
  // Memory a peer might still write must stay mapped until every rank is done with it: finish
  // this rank's device work, then meet the others, then unmap.
  try {
    backend->device_synchronize();
  } catch (const std::exception& e) {
    GNIO_WARN(Init, "teardown: device work ended with an error: %s", e.what());
  }
  // Operations still in the proxy's hands land before the peers unmap their heaps.
  if (proxy && !aborted.load() && !proxy->drain())
    GNIO_WARN(Proxy, "teardown: not every proxy operation was acknowledged by its target");
  if (!aborted.load()) {
    try {
      bootstrap->barrier();
    } catch (const std::exception& e) {
      GNIO_WARN(Init, "teardown: not every rank reached the final barrier (%s); unmapping anyway",
                e.what());
    }
  }
  // After the barrier every rank is leaving in order: the goodbye keeps the others from taking
  // this rank's exit for a death. Before the heap goes, so no loss is reported into freed state.
  liveness.reset();
  proxy.reset();
  // CUDA IPC heaps are freed only after every peer closed them: the teardown waits for the
  // others again unless the communicator was aborted.
  if (heap) heap->teardown(!aborted.load());
  heap.reset();
  fds.reset();
  if (control) backend->free_host_mapped(control);
  backend->destroy_stream(cuda_stream, host_stream);
  backend.reset();
}

StreamRef CommImpl::internal_stream() const {
  return host_stream ? StreamRef(host_stream) : StreamRef(cuda_stream);
}

SymPtr<char> CommImpl::alloc_internal(std::size_t bytes, bool clear) {
  std::uint64_t off = heap->allocate(bytes, 256);
  if (proxy) proxy->set_heap_bytes(heap->mapped());
  internal_bytes += bytes;
  if (clear) {
    backend->fill(heap->local_base() + off, 0, bytes, internal_stream());
    backend->stream_synchronize(internal_stream());
  }
  return SymPtr<char>{heap_id, 0, off};
}

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

std::string CommImpl::describe_offset(std::uint64_t offset) const {
  if (offset == ~0ull) return "no address";
  return format("symmetric-heap offset 0x%llx", static_cast<unsigned long long>(offset));
}

void CommImpl::on_peer_lost(int rank, const std::string& what) noexcept {
  {
    std::lock_guard<std::mutex> lock(loss_mutex);
    if (lost_rank >= 0) {
      GNIO_WARN(Init, "rank %d: also lost: %s", bootstrap->rank(), what.c_str());
      return;
    }
    lost_rank = rank;
    loss = what;
    // The host-side flags before the abort word (a host check after a device wait that the
    // abort ended must find them), and all of it under the lock with lost_rank: a transport
    // failure at the same moment (on_link_lost) either finds the word set (and leaves it) or
    // comes first; never lost_rank set but the word still free, which would let it abort the
    // device without naming the rank.
    peer_lost.store(true, std::memory_order_release);
    aborted.store(true);
    abort_device_for(rank);
  }
  GNIO_WARN(Init, "rank %d: %s; aborting the communicator", bootstrap->rank(), what.c_str());
  // After the abort word: writing the file must not delay stopping the device waits.
  dump_flight(FlightDump::PeerLost, what);
  // Bootstrap calls waiting on the dead rank (or on ranks waiting on it) end now, not at
  // GNIO_BOOTSTRAP_TIMEOUT: every survivor learns of the loss from its own watcher.
  if (auto* tcp = dynamic_cast<bootstrap::TcpBootstrap*>(bootstrap.get())) {
    try {
      tcp->fail_job(ErrorClass::RemoteError,
                    format("rank %d: %s", bootstrap->rank(), what.c_str()));
    } catch (...) {
      // Only allocation can throw here; the abort word above already stops the device side.
    }
  }
}

void CommImpl::dump_flight(FlightDump reason, const std::string& detail) noexcept {
  if (!flight.enabled()) return;
  const unsigned bit = static_cast<unsigned>(reason);
  if (flight_dumped.fetch_or(bit) & bit) return;
  static const char* const kReasons[] = {"timeout", "remote-error", "abort", "peer-lost"};
  const char* name = kReasons[bit == 1 ? 0 : bit == 2 ? 1 : bit == 4 ? 2 : 3];
  const int rank = bootstrap->rank();
  try {
    const std::string path = flight_dump_path(flight_dir, heap_id, rank);
    std::string error;
    if (flight.dump(path, heap_id, rank, bootstrap->size(), name, detail, &error))
      GNIO_WARN(Init,
                "rank %d: flight recorder (%s): wrote %s; run gnio-flight on every rank's file to "
                "see which rank is behind",
                rank, name, path.c_str());
    else
      GNIO_WARN(Init, "rank %d: flight recorder (%s): cannot write %s (GNIO_FLIGHT_RECORDER_DIR)",
                rank, name, error.c_str());
  } catch (...) {
    // Out of memory while reporting another failure: the original error still surfaces.
  }
}

void CommImpl::on_link_lost(int rank) noexcept {
  std::lock_guard<std::mutex> lock(loss_mutex);
  // A rank the watcher declared lost, or any earlier abort, keeps its code and rank.
  if (lost_rank >= 0 || control_stopped(*control, dev::Order::Acquire)) return;
  abort_device_for(rank);
}

void CommImpl::abort_device_for(int rank) noexcept {
  // Device waits read failed_rank only after they see kAbortPeerLost (acquire).
  dev::atomic_store(&control->failed_rank, static_cast<std::uint32_t>(rank), dev::Order::Relaxed);
  dev::atomic_store(&control->abort, kAbortPeerLost, dev::Order::Release);
}

void CommImpl::check_alive() const {
  if (!peer_lost.load(std::memory_order_acquire)) return;
  std::string what;
  {
    std::lock_guard<std::mutex> lock(loss_mutex);
    what = loss;
  }
  fail(ErrorClass::RemoteError,
       "rank %d: %s. The communicator is aborted: destroy it (and end the job, or build a new "
       "one without that rank)",
       bootstrap->rank(), what.c_str());
}

void CommImpl::check() const {
  // A lost rank explains whatever the device saw afterwards (a wait on it timing out).
  check_alive();
  if (proxy) proxy->check();
  const StallRecord& r = control->stall;
  if (dev::atomic_load(const_cast<std::uint32_t*>(&r.state), dev::Order::Acquire) == 2u) {
    static const char* kCmp[] = {"==", "!=", ">", ">=", "<", "<="};
    std::string where = format("%s at %s:%u", r.op, r.file, r.line);
    switch (r.status) {
      case Status::Timeout:
        fail(ErrorClass::Timeout,
             "rank %d: device wait timed out after %.3f s in %s: waited for the word at %s to be "
             "%s %llu, last saw %llu%s. The peer that should have written it is stalled, dead or "
             "never got there; raise GNIO_TIMEOUT if it is just slow",
             r.rank, r.waited_ns / 1e9, where.c_str(), describe_offset(r.heap_offset).c_str(),
             kCmp[r.cmp < 6 ? r.cmp : 0], static_cast<unsigned long long>(r.expected),
             static_cast<unsigned long long>(r.seen),
             r.peer >= 0 ? format(" (expected from rank %d)", r.peer).c_str() : "");
      case Status::RemoteError:
        fail(ErrorClass::RemoteError,
             "rank %d: %s: rank %d failed this call (a wait there timed out or the call hit an "
             "error) and published a failure mark instead of its progress, so no result of the "
             "call is reported as done; that rank's own error says why. The communicator is "
             "aborted",
             r.rank, where.c_str(), r.peer);
      case Status::Unsupported:
        fail(ErrorClass::Unsupported,
             "rank %d: %s targeted rank %d, which no transport reaches (it is on another node and "
             "%s)",
             r.rank, where.c_str(), r.peer,
             proxy ? "this collective algorithm loads and stores peers' memory, which only ranks "
                     "of one node can; across nodes collectives run oneshot or ring "
                     "(CollAlgo::Auto, OneShot or Ring)"
                   : "no network transport is configured: GNIO_NET=none, or the cuda backend");
      case Status::InvalidArgument:
        // Two-sided messages (gnio/device/channel.hpp) say what was wrong through the comparison:
        // Le = the message reached `seen` bytes against a buffer of `expected`; Lt = no channel
        // (peer, tag `seen`) in a set of `expected` tags.
        if (r.cmp == static_cast<std::uint32_t>(Cmp::Le))
          fail(ErrorClass::InvalidArgument,
               "rank %d: %s: the message from rank %d does not fit the buffer: it reached %llu "
               "bytes, the buffer holds %llu (nothing was written past it)",
               r.rank, where.c_str(), r.peer, static_cast<unsigned long long>(r.seen),
               static_cast<unsigned long long>(r.expected));
        if (r.cmp == static_cast<std::uint32_t>(Cmp::Lt))
          fail(ErrorClass::InvalidArgument,
               "rank %d: %s: no channel to or from rank %d with tag %llu (the set has %llu tags "
               "and the communicator %d ranks)",
               r.rank, where.c_str(), r.peer, static_cast<unsigned long long>(r.seen),
               static_cast<unsigned long long>(r.expected), bootstrap->size());
        fail(ErrorClass::InvalidArgument,
             "rank %d: %s got a bad argument: peer %d, %s, %llu bytes (heap holds %llu bytes per "
             "rank; fetch the DeviceComm again after alloc)",
             r.rank, where.c_str(), r.peer, describe_offset(r.heap_offset).c_str(),
             static_cast<unsigned long long>(r.expected), static_cast<unsigned long long>(r.seen));
      default:
        fail(ErrorClass::Internal, "rank %d: device error %u in %s", r.rank,
             static_cast<unsigned>(r.status), where.c_str());
    }
  }
  if (aborted.load()) {
    // A lost rank or a transport failure recorded since the checks above says more.
    check_alive();
    if (proxy) proxy->check();
    fail(ErrorClass::RemoteError, "rank %d: the communicator was aborted", bootstrap->rank());
  }
}

}  // namespace detail

// ------------------------------------------------------------------------------------------------

Comm::Comm(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
Comm::Comm(Comm&&) noexcept = default;
Comm& Comm::operator=(Comm&&) noexcept = default;
Comm::Comm(const Comm&) = default;
Comm& Comm::operator=(const Comm&) = default;
Comm::~Comm() = default;

Comm Comm::from_env(const CommOptions& options) {
  LaunchInfo info = launch_info_from_env();
  std::unique_ptr<Bootstrap> bs = Bootstrap::from_env();
  return Comm(std::make_shared<detail::CommImpl>(std::move(bs), std::move(info), options));
}

Comm Comm::from_unique_id(const UniqueId& id, int rank, int size, const CommOptions& options) {
  GNIO_REQUIRE(size > 0 && rank >= 0 && rank < size, "from_unique_id: rank %d is not in [0, %d)",
               rank, size);
  LaunchInfo info;
  info.rank = rank;
  info.size = size;
  info.source = "unique-id";
  std::unique_ptr<Bootstrap> bs = Bootstrap::create(id, rank, size);
  return Comm(std::make_shared<detail::CommImpl>(std::move(bs), std::move(info), options));
}

int Comm::rank() const noexcept {
  return impl_->bootstrap->rank();
}
int Comm::size() const noexcept {
  return impl_->bootstrap->size();
}
int Comm::local_rank() const noexcept {
  return impl_->local_rank;
}
int Comm::local_size() const noexcept {
  return static_cast<int>(impl_->node_ranks.size());
}
int Comm::node() const noexcept {
  return impl_->node;
}
int Comm::nodes() const noexcept {
  return impl_->nodes;
}
const std::string& Comm::node_id() const noexcept {
  return impl_->node_id;
}
const std::vector<int>& Comm::node_ranks() const noexcept {
  return impl_->node_ranks;
}
Backend Comm::backend() const noexcept {
  return impl_->backend_kind;
}
int Comm::device() const noexcept {
  return impl_->backend->device();
}
std::string Comm::device_description() const {
  return impl_->backend->describe();
}
const std::string& Comm::launch_source() const noexcept {
  return impl_->info.source;
}
Bootstrap& Comm::bootstrap() const {
  return *impl_->bootstrap;
}

SymPtr<char> Comm::alloc_bytes(std::size_t bytes, std::size_t align) {
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->record(detail::host_op(detail::FlightEvent::Alloc, bytes));
  std::uint64_t off = impl_->heap->allocate(bytes, align);
  if (impl_->proxy) impl_->proxy->set_heap_bytes(impl_->heap->mapped());
  return SymPtr<char>{impl_->heap_id, 0, off};
}

void Comm::free_bytes(SymPtr<char> p) {
  if (p.is_null()) return;
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "free: the pointer belongs to another communicator's heap");
  impl_->check_alive();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  GNIO_REQUIRE(
      impl_->heap->allocation_size(p.offset) != 0,
      "free: offset 0x%llx is not a live symmetric allocation (double free?); nothing was freed",
      static_cast<unsigned long long>(p.offset));
  impl_->record(detail::host_op(detail::FlightEvent::Free, impl_->heap->allocation_size(p.offset)));
  impl_->backend->device_synchronize();
  // A kernel can end with its operations still in the proxy's hands (a credit signal, say): they
  // must land before any rank frees, or they land in whatever is allocated there next.
  if (impl_->proxy && !impl_->proxy->drain())
    fail(ErrorClass::Timeout,
         "free: operations this rank's kernels posted through the proxy were not acknowledged by "
         "their targets within the timeout; nothing was freed");
  impl_->bootstrap->barrier();
  impl_->heap->free(p.offset);
}

void* Comm::local_address(SymPtr<char> p) const {
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "local: the pointer is null or belongs to another communicator");
  return impl_->heap->local_base() + p.offset;
}

void* Comm::peer_address(SymPtr<char> p, int peer_rank) const {
  GNIO_REQUIRE(p.heap == impl_->heap_id,
               "peer: the pointer is null or belongs to another communicator");
  GNIO_REQUIRE(peer_rank >= 0 && peer_rank < size(), "peer: rank %d is not in [0, %d)", peer_rank,
               size());
  auto it = std::find(impl_->node_ranks.begin(), impl_->node_ranks.end(), peer_rank);
  if (it == impl_->node_ranks.end()) return nullptr;
  return impl_->heap->peer_base(static_cast<int>(it - impl_->node_ranks.begin())) + p.offset;
}

const char* Comm::heap_mapping() const noexcept {
  return to_string(impl_->heap->mapping());
}

Window Comm::register_buffer(void* ptr, std::size_t bytes) {
  detail::CommImpl& c = *impl_;
  c.check_alive();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.record(detail::host_op(detail::FlightEvent::Register, bytes));
  detail::WindowContext ctx;
  ctx.owner = impl_;
  ctx.backend = c.backend.get();
  ctx.bootstrap = c.bootstrap.get();
  ctx.fds = c.fds.get();
  ctx.node_ranks = c.node_ranks;
  ctx.local_index = c.local_rank;
  ctx.mutex = &c.mutex;
  ctx.aborted = [weak = std::weak_ptr<detail::CommImpl>(impl_)] {
    auto comm = weak.lock();
    return !comm || comm->aborted.load() || control_stopped(*comm->control, dev::Order::Acquire);
  };
  ctx.stream = c.internal_stream();
  ctx.stats = &c.window_stats;
  ctx.heap = c.heap.get();
  Window w(detail::register_window(std::move(ctx), c.next_window_id, ptr, bytes));
  ++c.next_window_id;
  return w;
}

void Comm::deregister(Window& window) {
  std::shared_ptr<detail::WindowImpl> impl = window.impl();
  if (!impl || !impl->registered()) {
    window = Window();
    return;
  }
  GNIO_REQUIRE(impl->context().owner.get() == static_cast<const void*>(impl_.get()),
               "deregister: the window was registered with another communicator");
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->record(detail::host_op(detail::FlightEvent::Deregister));
    impl->deregister(true);
  }
  // Outside the lock: dropping the last reference runs ~WindowImpl, which would lock again.
  window = Window();
}

void* Comm::alloc_device(std::size_t bytes) {
  return impl_->backend->alloc_device(bytes);
}
void Comm::free_device(void* p) {
  impl_->backend->free_device(p);
}
void Comm::copy(void* dst, const void* src, std::size_t bytes, StreamRef stream) {
  impl_->backend->copy(dst, src, bytes, stream);
}
void Comm::fill(void* dst, int value, std::size_t bytes, StreamRef stream) {
  impl_->backend->fill(dst, value, bytes, stream);
}

MemoryStats Comm::memory_stats() const {
  MemoryStats s;
  s.heap_mapped = impl_->heap->mapped();
  s.heap_in_use = impl_->heap->in_use();
  s.heap_internal = impl_->internal_bytes;
  s.heap_reserved_va = impl_->heap->reserved_va();
  s.peer_mapped = impl_->heap->mapped() * (impl_->node_ranks.size() - 1);
  s.host_pinned = sizeof(DeviceControl);
  const detail::WindowStats& w = impl_->window_stats;
  s.windows = w.windows.load();
  s.window_bytes = w.registered.load();
  s.window_peer_mapped = w.peer_mapped.load();
  s.device_tables =
      w.tables.load() +
      (impl_->heap->peer_base_table() ? sizeof(std::uint64_t) * impl_->node_ranks.size() : 0);
  return s;
}

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

DeviceComm Comm::device_handle() const {
  const detail::CommImpl& c = *impl_;
  DeviceComm handle;
  detail::DeviceCommState& d = detail::DeviceCommPort::state(handle);
  d.rank_ = rank();
  d.size_ = size();
  d.local_rank_ = c.local_rank;
  d.local_size_ = static_cast<int>(c.node_ranks.size());
  d.node_first_ = c.node_ranks.front();
  d.node_contiguous_ =
      c.node_ranks.back() - c.node_ranks.front() + 1 == static_cast<int>(c.node_ranks.size());
  d.heap_id_ = c.heap_id;
  d.heap_base_ = c.heap->base();
  d.heap_stride_ = c.heap->stride();
  d.heap_peer_base_ = c.heap->peer_base_table();
  d.heap_bytes_ = c.heap->mapped();
  d.local_index_ =
      reinterpret_cast<const std::int16_t*>(c.heap->local_base() + c.local_index_table.offset);
  d.control_ = c.control;
  d.stall_claim_ = reinterpret_cast<std::uint32_t*>(c.heap->local_base() + c.stall_claim.offset);
  d.timeout_ns_ = static_cast<std::uint64_t>(c.timeout_s * 1e9);
  d.proxy_ = c.proxy ? c.proxy->handle() : ProxyHandle{};
  d.world_ = c.world;
  d.node_ = c.node_team;
  return handle;
}

namespace {

/// Runs `body`; a Timeout or RemoteError it throws first dumps the flight recorder.
template <class F>
void dumping_failures(detail::CommImpl& impl, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.error_class() == ErrorClass::Timeout)
      impl.dump_flight(detail::FlightDump::Timeout, e.message());
    else if (e.error_class() == ErrorClass::RemoteError)
      impl.dump_flight(detail::FlightDump::RemoteError, e.message());
    throw;
  }
}

/// Comm::synchronize without the recording. Once the communicator failed it still lets the stream
/// drain (every gnio wait ends at the abort flag) before it throws: the caller may free or reuse
/// what the queued work reads and writes once the call is over, as after a successful one.
void synchronize_stream(detail::CommImpl& impl, StreamRef stream) {
  constexpr double kDrainAfterFailure_s = 30;
  constexpr std::chrono::microseconds kFailureCheck{10000};
  const double limit = impl.timeout_s > 0 ? impl.timeout_s + 30 : 0;
  Deadline deadline = Deadline::after(limit);
  std::exception_ptr failure;
  Deadline drain = Deadline::never();
  for (;;) {
    // Woken when the stream ends; every kFailureCheck meanwhile the communicator's failures
    // (a peer lost, the proxy's link cut) are looked at, so a wait they end does not outlast them.
    if (impl.backend->stream_wait_idle(stream, kFailureCheck)) {
      if (failure) {
        // The stream's own error (work the abort cut short) follows from the failure.
        try {
          impl.backend->stream_synchronize(stream);
        } catch (const std::exception&) {
        }
        std::rethrow_exception(failure);
      }
      impl.backend->stream_synchronize(stream);  // surfaces errors the stream captured
      impl.check();
      return;
    }
    if (failure) {
      if (drain.expired()) {
        GNIO_WARN(Init,
                  "rank %d: the stream still runs work %.0f s after the communicator failed (a "
                  "kernel spinning outside gnio's waits?); what that work uses must stay allocated",
                  impl.bootstrap->rank(), kDrainAfterFailure_s);
        std::rethrow_exception(failure);
      }
    } else {
      try {
        impl.check();
      } catch (const std::exception&) {
        failure = std::current_exception();
        drain = Deadline::after(kDrainAfterFailure_s);
      }
      if (!failure && deadline.expired())
        fail(ErrorClass::Timeout,
             "rank %d: the stream did not finish within %.0f s and no gnio wait reported a "
             "stall; a kernel may be spinning outside gnio's bounded waits",
             impl.bootstrap->rank(), limit);
    }
  }
}

}  // namespace

void Comm::check() const {
  impl_->record(detail::host_op(detail::FlightEvent::Check));
  dumping_failures(*impl_, [&] { impl_->check(); });
}

void Comm::synchronize(StreamRef stream) const {
  detail::FlightEntry e = detail::host_op(detail::FlightEvent::Synchronize);
  e.stream = stream.is_host() ? reinterpret_cast<std::uintptr_t>(stream.host())
                              : reinterpret_cast<std::uintptr_t>(stream.cuda());
  impl_->record(e);
  dumping_failures(*impl_, [&] { synchronize_stream(*impl_, stream); });
}

void Comm::abort() noexcept {
  impl_->aborted.store(true);
  dev::atomic_store(&impl_->control->abort, kAbortByHost, dev::Order::Release);
  impl_->record(detail::host_op(detail::FlightEvent::Abort));
  impl_->dump_flight(detail::FlightDump::Abort, "Comm::abort() was called");
}

bool Comm::aborted() const noexcept {
  return impl_->aborted.load() || control_stopped(*impl_->control, dev::Order::Acquire);
}

// ------------------------------------------------------------------------------------------------

Stream::Stream(const Comm& comm) : comm_(comm.impl()) {
  comm_->backend->create_stream(&cuda_, &host_);
}
Stream::~Stream() {
  if (comm_) comm_->backend->destroy_stream(cuda_, host_);
}
Stream::Stream(Stream&& o) noexcept : comm_(std::move(o.comm_)), cuda_(o.cuda_), host_(o.host_) {
  o.cuda_ = nullptr;
  o.host_ = nullptr;
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (comm_) comm_->backend->destroy_stream(cuda_, host_);
    comm_ = std::move(o.comm_);
    cuda_ = o.cuda_;
    host_ = o.host_;
    o.cuda_ = nullptr;
    o.host_ = nullptr;
  }
  return *this;
}
void Stream::synchronize() const {
  comm_->backend->stream_synchronize(*this);
}

}  // namespace gnio
