// The state behind a Comm (comm_impl.hpp): its creation (who is on which node, the platform
// backend, the symmetric heap, the internal tables and teams, the network transport, the
// liveness watcher), its teardown, and its internal symmetric memory.
#include "core/comm_impl.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>

#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio::detail {

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
    proxy = proxy::make_proxy(net, {.backend = *backend,
                                    .bootstrap = *bootstrap,
                                    .node_of_rank = node_of_rank,
                                    .heap_base = heap->local_base(),
                                    .heap_bytes = heap->mapped(),
                                    .control = control,
                                    .stream = internal_stream(),
                                    .timeout_s = timeout_s,
                                    .on_link_lost = [this](int r) { on_link_lost(r); }});
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

std::string CommImpl::describe_offset(std::uint64_t offset) const {
  if (offset == ~0ull) return "no address";
  return format("symmetric-heap offset 0x%llx", static_cast<unsigned long long>(offset));
}

}  // namespace gnio::detail
