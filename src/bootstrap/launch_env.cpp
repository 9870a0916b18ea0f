#include "bootstrap/launch_env.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/config.hpp"

namespace gnio {
namespace bootstrap {
namespace {

// Launcher variables are not GNIO_* variables, so they are read directly, not via the table.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool parse_int(const char* text, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  while (end && (*end == ' ' || *end == '\n' || *end == '\t')) ++end;
  if (errno || end == text || *end) return false;
  *out = v;
  return true;
}

// The variable's integer value; nullopt when unset. `what` says what gnio reads it as.
std::optional<int> env_int(const char* name, const char* what) {
  const char* v = env(name);
  if (!v) return std::nullopt;
  long long x = 0;
  if (!parse_int(v, &x) || x < INT_MIN || x > INT_MAX)
    fail(ErrorClass::InvalidArgument,
         "environment variable %s='%s' is not an integer (gnio reads it as the %s); fix or unset "
         "it",
         name, v, what);
  return static_cast<int>(x);
}

int required_int(const char* name, const char* what, const char* because) {
  auto v = env_int(name, what);
  if (!v)
    fail(ErrorClass::InvalidArgument,
         "environment variable %s is not set, but %s; the launcher should set both (or unset the "
         "other)",
         name, because);
  return *v;
}

// Names of the variables a source reads, for messages.
struct Vars {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

void validate(const LaunchInfo& info, const Vars& v) {
  if (info.size < 1)
    fail(ErrorClass::InvalidArgument, "environment variable %s=%d: the job size must be at least 1",
         v.size, info.size);
  if (info.size > kMaxRanks)
    fail(ErrorClass::InvalidArgument, "environment variable %s=%d exceeds gnio's limit of %d ranks",
         v.size, info.size, kMaxRanks);
  if (info.rank < 0 || info.rank >= info.size)
    fail(ErrorClass::InvalidArgument,
         "environment variable %s=%d is not a rank of a job of %s=%d ranks (0..%d)", v.rank,
         info.rank, v.size, info.size, info.size - 1);
  if (info.local_size != 0 && (info.local_size < 1 || info.local_size > info.size))
    fail(ErrorClass::InvalidArgument,
         "environment variable %s=%d: ranks on this node must be 1..%s (%d)", v.local_size,
         info.local_size, v.size, info.size);
  if (info.local_rank != -1 &&
      (info.local_rank < 0 || (info.local_size > 0 && info.local_rank >= info.local_size) ||
       info.local_rank >= info.size))
    fail(ErrorClass::InvalidArgument, "environment variable %s=%d is not a node-local rank (0..%d)",
         v.local_rank, info.local_rank, (info.local_size > 0 ? info.local_size : info.size) - 1);
}

int port_value(const char* name, int value) {
  if (value < 1 || value > 65535)
    fail(ErrorClass::InvalidArgument, "environment variable %s=%d is not a TCP port (1..65535)",
         name, value);
  return value;
}

int gnio_port() {
  long long p = config_int("GNIO_BOOTSTRAP_PORT");
  if (p < 0 || p > 65535)
    fail(ErrorClass::InvalidArgument,
         "environment variable GNIO_BOOTSTRAP_PORT=%lld is not a TCP port (1..65535, or 0 for "
         "the default)",
         p);
  return static_cast<int>(p);
}

// Tasks of the step on this node from Slurm's compressed list, e.g. "2(x3),1" = 2,2,2,1, indexed
// by SLURM_NODEID. nullopt when it cannot be read simply.
std::optional<int> slurm_tasks_on_node() {
  if (const char* list = env("SLURM_STEP_TASKS_PER_NODE")) {
    std::vector<int> per_node;
    const char* p = list;
    bool ok = true;
    while (ok && *p) {
      char* end = nullptr;
      long count = std::strtol(p, &end, 10);
      long repeat = 1;
      if (end == p || count < 1) ok = false;
      p = end;
      if (ok && p[0] == '(' && p[1] == 'x') {
        repeat = std::strtol(p + 2, &end, 10);
        if (end == p + 2 || *end != ')' || repeat < 1 || repeat > (1 << 20)) ok = false;
        p = end + 1;
      }
      for (long i = 0; ok && i < repeat; ++i) per_node.push_back(static_cast<int>(count));
      if (ok && *p == ',')
        ++p;
      else if (ok && *p)
        ok = false;
    }
    if (ok && !per_node.empty()) {
      long long node = -1;
      if (const char* id = env("SLURM_NODEID")) {
        if (parse_int(id, &node) && node >= 0 && node < static_cast<long long>(per_node.size()))
          return per_node[static_cast<std::size_t>(node)];
      }
      bool uniform = true;
      for (int n : per_node) uniform = uniform && n == per_node[0];
      if (uniform) return per_node[0];
    }
  }
  if (const char* n = env("SLURM_NTASKS_PER_NODE")) {
    long long v = 0;
    if (parse_int(n, &v) && v >= 1 && v <= INT_MAX) return static_cast<int>(v);
  }
  return std::nullopt;
}

// Root address for launchers without MASTER_ADDR (Open MPI, Slurm, PMI).
void root_without_master(LaunchInfo& info) {
  if (const char* m = env("MASTER_ADDR"))
    info.root_host = m;
  else
    info.root_host = config_text("GNIO_BOOTSTRAP_ADDR");
  int port = gnio_port();
  if (port == 0) {
    if (auto mp = env_int("MASTER_PORT", "bootstrap root's port"))
      port = port_value("MASTER_PORT", *mp);
  }
  info.root_port = port;
}

std::optional<int> local_size_as_number(const char* name) {
  return env_int(name, "number of ranks on this node");
}

std::optional<int> slurm_local_size(const char* /*list_name*/) {
  return slurm_tasks_on_node();
}

// How one launcher tells each rank its place in the job.
struct Launcher {
  const char* source;  // LaunchInfo::source
  Vars vars;
  // Why the rank (size) variable must be set once the launcher was recognised, for the message.
  const char* rank_needed_because;
  const char* size_needed_because;
  // Slurm writes the node's rank count as a compressed list: read by its own parser.
  std::optional<int> (*read_local_size)(const char* name) = local_size_as_number;
};

constexpr Launcher kTorchrun = {"torchrun",
                                {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
                                "WORLD_SIZE is (torchrun convention)",
                                "RANK is (torchrun convention)"};
constexpr Launcher kOpenMpi = {"openmpi",
                               {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                               "OMPI_COMM_WORLD_SIZE is (Open MPI)",
                               "OMPI_COMM_WORLD_RANK is (Open MPI)"};
constexpr Launcher kSlurm = {
    "slurm",
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"},
    "",
    "SLURM_PROCID is (start the ranks with srun)",
    slurm_local_size};
constexpr Launcher kPmi = {"pmi",
                           {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                           "PMI_SIZE is (PMI)",
                           "PMI_RANK is (PMI)"};

// The rank, size and node-local ranks `launcher` set, checked; the root is left to the caller.
LaunchInfo ranks_from(const Launcher& launcher) {
  const Vars& v = launcher.vars;
  LaunchInfo info;
  info.rank = required_int(v.rank, "rank", launcher.rank_needed_because);
  info.size = required_int(v.size, "job size", launcher.size_needed_because);
  info.local_rank = env_int(v.local_rank, "node-local rank").value_or(-1);
  info.local_size = launcher.read_local_size(v.local_size).value_or(0);
  info.source = launcher.source;
  validate(info, v);
  return info;
}

// A launch by a launcher without MASTER_ADDR (Open MPI, Slurm, PMI).
LaunchInfo launch_without_master(const Launcher& launcher) {
  LaunchInfo info = ranks_from(launcher);
  root_without_master(info);
  return info;
}

}  // namespace

bool parse_job_token(const char* text, std::uint64_t* token) {
  std::string_view t(text);
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t.remove_prefix(2);
  if (t.empty() || t.size() > 16) return false;
  std::uint64_t v = 0;
  for (char c : t) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  *token = v;
  return true;
}

std::string job_ids_from_env(const LaunchInfo& info) {
  std::string ids;
  auto add = [&](const char* name) {
    if (const char* v = env(name); v && *v) {
      ids += '|';
      ids += name;
      ids += '=';
      ids += v;
    }
  };
  if (info.source == "torchrun" || info.source == "gnio-run") {
    add("TORCHELASTIC_RUN_ID");
  } else if (info.source == "openmpi") {
    add("OMPI_MCA_orte_ess_jobid");
    add("OMPI_MCA_ess_base_jobid");
    add("PMIX_NAMESPACE");
  } else if (info.source == "slurm") {
    add("SLURM_JOB_ID");
    add("SLURM_STEP_ID");
  } else if (info.source == "pmi") {
    add("PMIX_NAMESPACE");
  }
  return ids;
}

std::uint64_t job_token_from_env(const LaunchInfo& info) {
  std::string explicit_token = config_text("GNIO_JOB_TOKEN");
  if (!explicit_token.empty()) {
    std::uint64_t token = 0;
    if (!parse_job_token(explicit_token.c_str(), &token))
      fail(ErrorClass::InvalidArgument,
           "environment variable GNIO_JOB_TOKEN='%s' is not 1 to 16 hex digits; unset it or set "
           "the same hex value on every rank",
           explicit_token.c_str());
    return token;
  }
  // Not a secret (see the header): a hash of job-wide launcher ids, to keep jobs apart.
  std::string key = "gnio-job-token/v1/" + info.source + job_ids_from_env(info);
  key += "|root=" + info.root_host + ":" + std::to_string(info.root_port);
  return fnv1a64(key);
}

}  // namespace bootstrap

LaunchInfo launch_info_from_env() {
  using bootstrap::env;
  using bootstrap::env_int;
  if (env("RANK") || env("WORLD_SIZE")) {
    LaunchInfo info = bootstrap::ranks_from(bootstrap::kTorchrun);
    // gnio-run speaks torchrun's convention and also sets the job token.
    if (!env("TORCHELASTIC_RUN_ID") && !config_text("GNIO_JOB_TOKEN").empty())
      info.source = "gnio-run";
    if (const char* m = env("MASTER_ADDR")) info.root_host = m;
    int port = bootstrap::gnio_port();
    if (port == 0) {
      if (auto mp = env_int("MASTER_PORT", "rendezvous port")) {
        int master = bootstrap::port_value("MASTER_PORT", *mp);
        if (master == 65535)
          fail(ErrorClass::InvalidArgument,
               "environment variable MASTER_PORT=65535 leaves no room for gnio's bootstrap port "
               "(MASTER_PORT + 1); set GNIO_BOOTSTRAP_PORT or choose another MASTER_PORT");
        port = master + 1;
      }
    }
    info.root_port = port;
    return info;
  }
  if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE"))
    return bootstrap::launch_without_master(bootstrap::kOpenMpi);
  if (env("SLURM_PROCID")) return bootstrap::launch_without_master(bootstrap::kSlurm);
  if (env("PMI_RANK") || env("PMI_SIZE")) return bootstrap::launch_without_master(bootstrap::kPmi);
  fail(ErrorClass::InvalidArgument,
       "no launcher environment found: start the ranks with gnio-run, torchrun (RANK, WORLD_SIZE, "
       "MASTER_ADDR, MASTER_PORT), mpirun (Open MPI), srun (Slurm) or a PMI launcher, or create "
       "the bootstrap from a unique id (Bootstrap::create)");
}

}  // namespace gnio
