#include "gnio/config.hpp"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/fail.hpp"

namespace gnio {
namespace {

// Every GNIO_* variable gnio reads. Add a row here before reading a new one: config_text()
// refuses names that are not in this table, so gnio-info always documents all of them.
constexpr ConfigVar kVars[] = {
    // base
    {"GNIO_DEBUG", ConfigType::Enum, "WARN", "log level {NONE, WARN, INFO, TRACE}"},
    {"GNIO_DEBUG_SUBSYS", ConfigType::String, "",
     "comma list of subsystems to log (init,bootstrap,memory,transport,proxy,coll,device,net,eth,"
     "tool); ^name excludes one"},
    {"GNIO_DEBUG_FILE", ConfigType::String, "",
     "write log lines to this file instead of stderr; %h = host name, %p = process id"},
    // platform
    {"GNIO_BACKEND", ConfigType::Enum, "auto",
     "platform backend {auto, cuda, host}; auto takes cuda when a GPU is visible"},
    {"GNIO_DEVICE", ConfigType::Int, "-1",
     "GPU ordinal for this rank; -1 = LOCAL_RANK modulo the GPU count (under gnio-run --nodes, "
     "the rank's index on this machine modulo the GPU count, so simulated nodes use distinct "
     "GPUs)"},
    {"GNIO_MACHINE_LOCAL_RANK", ConfigType::Int, "-1",
     "set by gnio-run --nodes: the rank's index among the ranks on this machine (its simulated "
     "nodes all run here); picks the GPU when GNIO_DEVICE is -1; -1 = not set"},
    // waits
    {"GNIO_TIMEOUT", ConfigType::Seconds, "120",
     "deadline of every device and host wait on a peer; 0 = wait forever (abort still works)"},
    {"GNIO_HEARTBEAT_INTERVAL", ConfigType::Seconds, "1",
     "period of the liveness heartbeats every rank exchanges with its parent and children in the "
     "liveness tree (GNIO_LIVENESS_FANOUT); a rank silent for 10 "
     "periods (at least 3 s, at most GNIO_TIMEOUT) or whose connection drops counts as dead and "
     "aborts the communicator with RemoteError; 0 = no peer-failure detection"},
    {"GNIO_LIVENESS_FANOUT", ConfigType::Int, "8",
     "children per rank in the liveness tree (1..255, the same on every rank): each rank watches "
     "its parent and at most this many children, and a death is passed on along the tree, at "
     "most 2 * ceil(log_F(ranks)) relays; 1 makes a chain, a large value a star on rank 0"},
    // bootstrap
    {"GNIO_BOOTSTRAP_TIMEOUT", ConfigType::Seconds, "120",
     "deadline for bootstrap connections and exchanges (init, allgather, barrier, send/recv)"},
    {"GNIO_SOCKET_IFNAME", ConfigType::String, "",
     "network interface for the bootstrap (and tcp transport) sockets; empty = the interface of "
     "the root address / first non-loopback one"},
    {"GNIO_BOOTSTRAP_ADDR", ConfigType::String, "",
     "IP address for the bootstrap: when it is one of this host's addresses the listener binds to "
     "it (overrides GNIO_SOCKET_IFNAME); otherwise it names the root (for Open MPI, Slurm and "
     "PMI launches, which have no MASTER_ADDR; MASTER_ADDR wins when both are set)"},
    {"GNIO_BOOTSTRAP_PORT", ConfigType::Int, "0",
     "root's bootstrap port when initialising from launcher variables; 0 = MASTER_PORT + 1"},
    {"GNIO_RENDEZVOUS_DIR", ConfigType::String, "",
     "directory of the rendezvous file through which the ranks of an Open MPI, Slurm or PMI job "
     "that all run on one host meet when no MASTER_ADDR is given; empty = TMPDIR, else /tmp"},
    {"GNIO_JOB_TOKEN", ConfigType::String, "",
     "64-bit job token (hex) every bootstrap connection must carry; gnio-run sets a random one; "
     "empty = derived from the launcher's job id"},
    {"GNIO_NODE_ID", ConfigType::String, "",
     "node identity of this rank; ranks with equal ids map each other's memory; empty = host name "
     "+ boot id"},
    // transports
    {"GNIO_NET", ConfigType::Enum, "auto",
     "network transport to ranks on other nodes {auto, tcp, ucx, none}: tcp = proxy threads + "
     "TCP connections per peer pair (GNIO_NET_NSOCKS; every device operation and every "
     "collective); ucx = a proxy thread driving UCX one-sided puts, gets, atomics and flushes "
     "into memory registered at allocation (UCX_TLS, UCX_NET_DEVICES choose its transports; needs "
     "a build with UCX; on GPUs without UCX CUDA support heap data is staged through host memory "
     "as messages); auto = tcp when the job spans "
     "nodes; none = operations on other nodes fail with Unsupported"},
    {"GNIO_UCX_WORD_OPS", ConfigType::Enum, "auto",
     "how GNIO_NET=ucx applies signals and atomics to another node's heap and landing regions "
     "{auto, rma, am}: am = an active message the target's proxy thread applies (a kernel on GPU "
     "heaps), sent once everything posted before it completed; rma = UCX atomics (needs a UCX "
     "transport with atomics on that memory: InfiniBand/RoCE, GPU heaps with GPUDirect RDMA; UCX "
     "1.16 and later find none over tcp or shared memory, host memory included); auto = am"},
    {"GNIO_NET_NSOCKS", ConfigType::Int, "4",
     "tcp connections per pair of ranks on different nodes (1..16, the same on every rank): the "
     "first carries the device API's operations (in order, so fence and quiet hold), the others "
     "the collectives' pipes, spread by pipe, and the pieces of large puts "
     "(GNIO_NET_STRIPE_MIN), each with its own sending and receiving thread"},
    {"GNIO_NET_CONNECT", ConfigType::Enum, "lazy",
     "when the tcp transport opens its connections {lazy, eager} (the same on every rank): lazy = "
     "a rank connects to another node's rank when it first sends to it, and receives on the "
     "connections that rank opened, so its sockets grow with the peers it talks to; eager = one "
     "connection per pair and GNIO_NET_NSOCKS lane to every rank on another node at creation, "
     "used both ways"},
    {"GNIO_NET_STRIPE_MIN", ConfigType::Size, "4M",
     "a put into another node's heap of at least this many bytes is split over the connections "
     "past the first (GNIO_NET_NSOCKS > 1), sent and landed by their threads in parallel; the "
     "proxy takes no later operation until every piece is in place"},
    {"GNIO_PROXY_SLOTS", ConfigType::Int, "256",
     "proxy command ring: descriptors in flight per communicator (a power of two, 2..65536); a "
     "device thread that finds it full waits for a credit"},
    {"GNIO_PROXY_STAGING", ConfigType::Enum, "auto",
     "how the proxy moves data {auto, always}: auto = directly where it can address the memory "
     "(host backend), through page-locked bounce buffers for GPU memory (tcp; ucx when UCX has no "
     "CUDA support, as request messages); always = staged on the host backend too, and ucx's heap "
     "data as messages (tests of the GPU path on CPUs; the same on every rank)"},
    {"GNIO_PROXY_CHUNK", ConfigType::Size, "1M",
     "staged data moves in chunks of this size: the sending proxy thread has two bounce buffers of "
     "it (the copy of one chunk out of GPU memory overlaps the socket transfer of the other), the "
     "receiving thread a ring of four (the GPU empties one while the socket fills the next); the "
     "ucx "
     "backend's staged puts and gets keep up to four chunks in flight"},
    {"GNIO_PROXY_BATCH", ConfigType::Int, "64",
     "most received small puts and signals (each at most 4 KiB) the proxy hands to the GPU "
     "together: one batch of the delivery agent, or one kernel launch with GNIO_PROXY_AGENT=0 "
     "(1..64)"},
    {"GNIO_PROXY_AGENT", ConfigType::Bool, "0",
     "1 = received small puts and signals are applied on the GPU by a resident delivery agent "
     "(one block that polls a ring in host memory; started at the first delivery, stopped after "
     "10 ms without one) instead of a kernel launch per batch: no launch per batch and it keeps "
     "running beside kernels that fill the GPU, but today 3.8x slower 8-byte put rates (one "
     "H100); experimental"},
    {"GNIO_PROXY_SPIN_US", ConfigType::Int, "-1",
     "how long (microseconds) a proxy thread (and a packet-I/O port's thread) keeps polling after "
     "its last work before it sleeps: the latency of the first operation after a pause against a "
     "busy CPU core; -1 = 10000 on GPUs, 0 on the host backend (whose ranks share the CPUs with "
     "the proxy)"},
    {"GNIO_PROXY_STATS", ConfigType::Bool, "0",
     "print, when a communicator ends, where its proxy's time went: per frame sent (descriptor "
     "seen to data on the socket), received (header to delivery queued) and delivered (queued to "
     "data and signal in place on the GPU); counts, means, maxima"},
    {"GNIO_NET_CUT_AFTER", ConfigType::Size, "0",
     "fault injection for tests: the tcp transport cuts its connection to a peer (shutdown) in the "
     "middle of the put data that takes the bytes sent to that peer past this many; 0 = off"},
    {"GNIO_NET_BAD_REPLY", ConfigType::Bool, "0",
     "fault injection for tests: the tcp transport answers gets and atomics (ucx: signals and "
     "atomics sent as messages, GNIO_UCX_WORD_OPS) with a ticket that names no request of the "
     "asker, which must reject the reply; 0 = off"},
    // symmetric memory
    {"GNIO_HEAP_SIZE", ConfigType::Size, "256M",
     "symmetric heap mapped at Comm creation, per rank"},
    {"GNIO_HEAP_CHUNK", ConfigType::Size, "256M", "granule by which the symmetric heap grows"},
    {"GNIO_HEAP_MAX", ConfigType::Size, "64G",
     "virtual address space reserved per rank for the symmetric heap (costs no memory)"},
    {"GNIO_MEM_MAP", ConfigType::Enum, "auto",
     "how node peers map GPU heaps {auto, vmm, ipc}: vmm = CUDA VMM with POSIX fds (growable), "
     "ipc = legacy CUDA IPC (fixed size); auto tries vmm first"},
    // tools
    {"GNIO_RUN_PREFIX", ConfigType::Bool, "1",
     "gnio-run: prefix every line a rank prints with \"[rank] \"; 0 = pass the ranks' output "
     "through unchanged (same as --no-prefix)"},
    // host backend
    {"GNIO_HOST_MAX_THREADS", ConfigType::Int, "1024",
     "host backend: most threads (grid x block) one kernel launch may have; each is a CPU thread "
     "running concurrently with the others (the kernel thread pool holds up to 4x this, at least "
     "4096)"},
    {"GNIO_HOST_DEVICE_MEM", ConfigType::Size, "16G",
     "host backend: address space of this process's device-memory arena (alloc_device); a "
     "sparse memfd, so only memory actually written is used"},
    // bootstrap (continued)
    {"GNIO_BOOTSTRAP_MAX_MSG", ConfigType::Size, "64M",
     "largest bootstrap message: send/recv payload, broadcast, and allgather slot per rank; a peer "
     "frame above this is a protocol error (set the same value on every rank)"},
    {"GNIO_BOOTSTRAP_HELLO_TIMEOUT", ConfigType::Seconds, "5",
     "an incoming bootstrap connection that has not sent its complete hello within this time is "
     "dropped (port scanners, stalled or stray clients); 0 = no limit"},
    // collectives
    {"GNIO_ALGO", ConfigType::String, "auto",
     "collective algorithm: auto, ll, oneshot, twoshot or ring, or a comma list of them and of "
     "collective:algorithm pairs (allreduce, reduce_scatter, allgather, broadcast, reduce, "
     "alltoall, alltoallv); a bare algorithm applies to the collectives that have it; set the same "
     "on every rank"},
    {"GNIO_COLL_CHANNELS", ConfigType::Int, "4",
     "most streams per communicator that run collectives, each with its own channel (scratch, "
     "staging, call counters) allocated on the stream's first collective"},
    {"GNIO_COLL_SCRATCH", ConfigType::Size, "8M",
     "symmetric scratch per collective channel: half LL packet slots (2 x ranks), half ring "
     "pipes (ranks x 16 blocks x depth); a job on several nodes adds as much as the pipes again "
     "for messages the proxy carries"},
    {"GNIO_COLL_STAGING", ConfigType::Size, "0",
     "per collective channel, twice (input and output): symmetric staging of buffers outside the "
     "heap for oneshot/twoshot; larger calls run in pieces of this size; 0 = 64M on GPUs, 16M on "
     "the host backend"},
    {"GNIO_COLL_PIPE_DEPTH", ConfigType::Int, "2",
     "ring pipes: messages in flight per peer and block (2..64)"},
    {"GNIO_COLL_LL_MAX", ConfigType::Size, "512K",
     "auto: LL for collectives whose larger buffer (per rank) is at most this"},
    {"GNIO_COLL_ONESHOT_MAX", ConfigType::Size, "256K",
     "auto: oneshot up to this, twoshot above (every collective but reduce_scatter, which stays "
     "oneshot, and alltoallv, which is ring)"},
    {"GNIO_COLL_REMOTE_ONESHOT_MAX", ConfigType::Size, "64K",
     "auto on a team that spans nodes: oneshot (every input sent to every member through the "
     "pipes, one network hop) up to this, ring above"},
    {"GNIO_COLL_HIER", ConfigType::Enum, "auto",
     "host allreduce and allgather over several nodes of equal rank counts (at least 2 each) "
     "{auto, on, off}: hierarchical allreduce = reduce_scatter inside each node over peer memory, "
     "allreduce of each rank's block with its counterparts on the other nodes (1/ranks-per-node "
     "of the bytes cross the network), allgather inside each node; hierarchical allgather (each "
     "node's ranks consecutive) = allgather with the counterparts on the other "
     "nodes, then inside each node; auto = from GNIO_COLL_HIER_MIN bytes up, unless the "
     "collective's algorithm is forced (GNIO_ALGO); on = every such call; off = never"},
    {"GNIO_COLL_HIER_MIN", ConfigType::Size, "256K",
     "GNIO_COLL_HIER=auto: smallest allreduce (bytes per rank) or allgather (bytes of its output) "
     "that runs hierarchically"},
    {"GNIO_COLL_BLOCKS", ConfigType::Int, "0",
     "blocks per collective kernel (1..256, ring at most 16; taken as given, also on a GPU several "
     "ranks share); 0 = by algorithm and size (ll at most 64, oneshot/twoshot at most 128), capped "
     "so that the grids of ranks sharing a GPU are resident together"},
    {"GNIO_COLL_THREADS", ConfigType::Int, "0",
     "threads per block of collective kernels (multiple of 32; GPUs: at most what the kernels' "
     "registers allow); 0 = on GPUs 256, or 1024 once a rank moves 16 MiB; 4 on the host backend"},
    {"GNIO_CHECK", ConfigType::Bool, "0",
     "before each host collective, compare its arguments (collective, type, operator, count, "
     "root, call number) across ranks through the bootstrap and throw InvalidArgument on every "
     "rank on a mismatch; costs a host round trip per call (debugging)"},
    {"GNIO_FLIGHT_RECORDER", ConfigType::Int, "1024",
     "host operations each rank remembers (collectives, alloc/free/register, split, synchronize, "
     "check, abort) with sequence numbers; the ring is written as JSON to GNIO_FLIGHT_RECORDER_DIR "
     "on a Timeout or RemoteError from check/synchronize, on abort and on a lost peer (read the "
     "files with gnio-flight); 0 = off"},
    {"GNIO_FLIGHT_RECORDER_DIR", ConfigType::String, "/tmp",
     "directory of the flight-recorder dumps gnio-flight-<comm>-rank<r>.json; empty = the current "
     "directory"},
    // NCCL drop-in
    {"GNIO_NCCL_FALLBACK", ConfigType::String, "",
     "libgnio_nccl (the NCCL drop-in): path of a real NCCL 2.28 library (libnccl.so.2; a copy "
     "when the program links one itself, as PyTorch does) that runs what gnio does not carry "
     "(ncclAvg, PreMulSum and other user operators, min/max of int8, "
     "uint32 and uint64, NCCL's device-API windows and ncclDevComm), loaded when the first "
     "communicator is created; each drop-in communicator then creates one of the real NCCL beside "
     "it (same ranks, same GPU), and each kind of call that goes there is logged once (WARN); a "
     "path that cannot be loaded fails communicator creation; empty = such calls fail with "
     "ncclInvalidUsage"},
};

bool parse_bool(const std::string& s, bool* out) {
  const char* t = s.c_str();
  if (!strcasecmp(t, "1") || !strcasecmp(t, "true") || !strcasecmp(t, "yes") ||
      !strcasecmp(t, "on")) {
    *out = true;
    return true;
  }
  if (!strcasecmp(t, "0") || !strcasecmp(t, "false") || !strcasecmp(t, "no") ||
      !strcasecmp(t, "off") || s.empty()) {
    *out = false;
    return true;
  }
  return false;
}

const ConfigVar* find(const char* name) {
  for (const ConfigVar& v : kVars)
    if (!std::strcmp(v.name, name)) return &v;
  return nullptr;
}

[[noreturn]] void bad_value(const char* name, const std::string& text, const char* expected) {
  fail(ErrorClass::InvalidArgument, "environment variable %s='%s' is not %s; unset it or fix it",
       name, text.c_str(), expected);
}

}  // namespace

std::span<const ConfigVar> config_vars() noexcept {
  return kVars;
}

std::string config_text(const char* name) {
  const ConfigVar* v = find(name);
  if (!v) fail(ErrorClass::Internal, "configuration variable %s is not in gnio's table", name);
  const char* e = std::getenv(name);
  return e ? std::string(e) : std::string(v->default_value);
}

bool config_is_set(const char* name) {
  if (!find(name))
    fail(ErrorClass::Internal, "configuration variable %s is not in gnio's table", name);
  return std::getenv(name) != nullptr;
}

long long config_int(const char* name) {
  std::string t = config_text(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || errno || *end) bad_value(name, t, "an integer");
  return v;
}

std::optional<std::uint64_t> parse_byte_count(std::string_view text) noexcept {
  std::size_t i = 0;
  std::uint64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (~std::uint64_t{0} - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  unsigned shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      case 't':
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift) ++i;
  }
  if (shift && i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
  if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  if (i != text.size() || (shift && v > (~std::uint64_t{0} >> shift))) return std::nullopt;
  return v << shift;
}

unsigned long long config_size(const char* name) {
  const std::string t = config_text(name);
  const std::optional<std::uint64_t> v = parse_byte_count(t);
  if (!v) bad_value(name, t, "a byte count like 4096, 64K, 256M, 2G");
  return *v;
}

double config_seconds(const char* name) {
  std::string t = config_text(name);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end || !std::isfinite(v) || v < 0)
    bad_value(name, t, "a non-negative number of seconds");
  return v;
}

bool config_bool(const char* name) {
  std::string t = config_text(name);
  bool v = false;
  if (!parse_bool(t, &v)) bad_value(name, t, "a boolean (1/0, true/false, yes/no, on/off)");
  return v;
}

const char* to_string(ConfigType t) noexcept {
  switch (t) {
    case ConfigType::Int: return "int";
    case ConfigType::Size: return "size";
    case ConfigType::Seconds: return "seconds";
    case ConfigType::Bool: return "bool";
    case ConfigType::String: return "string";
    case ConfigType::Enum: return "enum";
  }
  return "?";
}

}  // namespace gnio
