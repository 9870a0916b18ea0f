// gnio-info: what this gnio is and what it sees. Version and build options, backends compiled
// in, GPUs and how they reach each other, every GNIO_* variable (default, current value,
// description) and, under a launcher (gnio-run, torchrun, mpirun, srun), this rank's facts.
//
//   gnio-info [--json] [--no-comm]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "gnio/version.hpp"
#include "platform/backend.hpp"
#include "platform/cuda/cuda_info.hpp"

namespace {

/// A minimal JSON writer: objects, arrays, strings, numbers, booleans; keys in insertion order.
class Json {
 public:
  void open(const char* key, char bracket) {
    comma();
    if (key) out_ += quote(key) + ":";
    out_ += bracket;
    first_ = true;
  }
  void close(char bracket) {
    out_ += bracket;
    first_ = false;
  }
  void str(const char* key, const std::string& v) { field(key, quote(v)); }
  void num(const char* key, long long v) { field(key, std::to_string(v)); }
  void boolean(const char* key, bool v) { field(key, v ? "true" : "false"); }
  const std::string& text() const { return out_; }

 private:
  void comma() {
    if (!first_) out_ += ",";
    first_ = false;
  }
  void field(const char* key, const std::string& value) {
    comma();
    if (key) out_ += quote(key) + ":";
    out_ += value;
  }
  static std::string quote(const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\', q += c;
      else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        q += buf;
      } else q += c;
    }
    return q + "\"";
  }
  std::string out_;
  bool first_ = true;
};

bool under_launcher() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

std::string gib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / double(1ull << 30));
  return buf;
}

std::string mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false, with_comm = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) json = true;
    else if (!std::strcmp(argv[i], "--no-comm")) with_comm = false;
    else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: gnio-info [--json] [--no-comm]\n"
                  "  Prints gnio's version, build, GPUs, configuration variables and, when run under\n"
                  "  a launcher (gnio-run -n N gnio-info), this rank's communicator facts.\n"
                  "  --json     one JSON object instead of text\n"
                  "  --no-comm  do not create a communicator even under a launcher\n");
      return 0;
    } else {
      std::fprintf(stderr, "gnio-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  gnio::BuildInfo build = gnio::build_info();
  std::vector<gnio::platform::CudaDeviceInfo> gpus = gnio::platform::cuda_devices();
  gnio::platform::CudaVersions cv = gnio::platform::cuda_versions();

  // This rank's facts, when a launcher started us.
  struct RankFacts {
    bool present = false;
    int rank = 0, size = 0, local_rank = 0, local_size = 0, node = 0, nodes = 0, device = -1;
    std::string node_id, backend, device_desc, source, error;
    gnio::MemoryStats mem;
  } facts;
  if (with_comm && under_launcher()) {
    try {
      gnio::Comm comm = gnio::Comm::from_env();
      facts.present = true;
      facts.rank = comm.rank();
      facts.size = comm.size();
      facts.local_rank = comm.local_rank();
      facts.local_size = comm.local_size();
      facts.node = comm.node();
      facts.nodes = comm.nodes();
      facts.node_id = comm.node_id();
      facts.backend = gnio::to_string(comm.backend());
      facts.device = comm.device();
      facts.device_desc = comm.device_description();
      facts.source = comm.launch_source();
      facts.mem = comm.memory_stats();
    } catch (const gnio::Error& e) {
      facts.error = e.what();
    }
  }

  if (json) {
    Json j;
    j.open(nullptr, '{');
    j.str("version", gnio::version_string());
    j.open("build", '{');
    j.boolean("cuda_backend", build.cuda_backend);
    j.str("cuda_archs", build.cuda_archs);
    j.str("build_type", build.build_type);
    j.str("sanitizer", build.sanitizer);
    j.str("compiler", build.compiler);
    j.close('}');
    j.open("backends", '[');
    j.str(nullptr, "host");
    if (build.cuda_backend) j.str(nullptr, "cuda");
    j.close(']');
    j.num("cuda_driver", cv.driver);
    j.num("cuda_runtime", cv.runtime);
    j.open("gpus", '[');
    for (const auto& g : gpus) {
      j.open(nullptr, '{');
      j.num("ordinal", g.ordinal);
      j.str("name", g.name);
      j.str("compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
      j.num("sms", g.sm_count);
      j.num("memory_bytes", static_cast<long long>(g.total_memory));
      j.str("pci_bus_id", g.pci_bus_id);
      j.boolean("vmm_posix_fd", g.vmm_posix_fd);
      j.open("peers", '[');
      for (const auto& p : g.peers) {
        j.open(nullptr, '{');
        j.num("peer", p.peer);
        j.boolean("can_access", p.can_access);
        j.num("performance_rank", p.performance_rank);
        j.boolean("native_atomics", p.native_atomics);
        j.close('}');
      }
      j.close(']');
      j.close('}');
    }
    j.close(']');
    j.open("config", '[');
    for (const gnio::ConfigVar& v : gnio::config_vars()) {
      j.open(nullptr, '{');
      j.str("name", v.name);
      j.str("type", gnio::to_string(v.type));
      j.str("default", v.default_value);
      j.str("value", gnio::config_text(v.name));
      j.boolean("set", gnio::config_is_set(v.name));
      j.str("description", v.description);
      j.close('}');
    }
    j.close(']');
    if (facts.present) {
      j.open("rank", '{');
      j.num("rank", facts.rank);
      j.num("size", facts.size);
      j.num("local_rank", facts.local_rank);
      j.num("local_size", facts.local_size);
      j.num("node", facts.node);
      j.num("nodes", facts.nodes);
      j.str("node_id", facts.node_id);
      j.str("backend", facts.backend);
      j.num("device", facts.device);
      j.str("device_description", facts.device_desc);
      j.str("launcher", facts.source);
      j.num("heap_mapped_bytes", static_cast<long long>(facts.mem.heap_mapped));
      j.num("heap_internal_bytes", static_cast<long long>(facts.mem.heap_internal));
      j.num("peer_mapped_bytes", static_cast<long long>(facts.mem.peer_mapped));
      j.num("reserved_va_bytes", static_cast<long long>(facts.mem.heap_reserved_va));
      j.close('}');
    } else if (!facts.error.empty()) {
      j.str("rank_error", facts.error);
    }
    j.close('}');
    std::printf("%s\n", j.text().c_str());
    return facts.error.empty() ? 0 : 1;
  }

  std::printf("gnio %s\n", gnio::version_string());
  std::printf("  build: %s, %s%s%s\n", build.build_type, build.compiler,
              *build.sanitizer ? ", sanitizer=" : "", build.sanitizer);
  std::printf("  backends: host%s\n",
              build.cuda_backend ? (std::string(", cuda (sm ") + build.cuda_archs + ")").c_str() : "");
  if (build.cuda_backend)
    std::printf("  CUDA driver %d.%d, runtime %d.%d\n", cv.driver / 1000, (cv.driver % 1000) / 10,
                cv.runtime / 1000, (cv.runtime % 1000) / 10);
  std::printf("\nGPUs: %zu\n", gpus.size());
  for (const auto& g : gpus) {
    std::printf("  [%d] %s, sm_%d%d, %d SMs, %s, PCI %s, VMM fd export: %s\n", g.ordinal, g.name.c_str(),
                g.cc_major, g.cc_minor, g.sm_count, gib(g.total_memory).c_str(), g.pci_bus_id.c_str(),
                g.vmm_posix_fd ? "yes" : "no");
    for (const auto& p : g.peers)
      std::printf("      -> [%d] peer access %s, link rank %d, native atomics %s\n", p.peer,
                  p.can_access ? "yes" : "no", p.performance_rank, p.native_atomics ? "yes" : "no");
  }
  std::printf("\nConfiguration (GNIO_* environment variables):\n");
  for (const gnio::ConfigVar& v : gnio::config_vars()) {
    std::string value = gnio::config_text(v.name);
    std::printf("  %-24s %-7s default=%-8s %s%s\n      %s\n", v.name, gnio::to_string(v.type),
                *v.default_value ? v.default_value : "''", gnio::config_is_set(v.name) ? "set=" : "",
                gnio::config_is_set(v.name) ? value.c_str() : "", v.description);
  }
  if (facts.present) {
    std::printf("\nThis rank: %d of %d (launcher: %s), local rank %d of %d, node %d of %d (id %s)\n",
                facts.rank, facts.size, facts.source.c_str(), facts.local_rank, facts.local_size,
                facts.node, facts.nodes, facts.node_id.c_str());
    std::printf("  backend %s, device %d: %s\n", facts.backend.c_str(), facts.device, facts.device_desc.c_str());
    std::printf("  memory: heap %s mapped (%s internal), peers' heaps %s mapped, %s address space reserved\n",
                mib(facts.mem.heap_mapped).c_str(), mib(facts.mem.heap_internal).c_str(),
                mib(facts.mem.peer_mapped).c_str(), gib(facts.mem.heap_reserved_va).c_str());
  } else if (!facts.error.empty()) {
    std::printf("\nThis rank: could not create a communicator: %s\n", facts.error.c_str());
    return 1;
  } else {
    std::printf("\n(Not under a launcher: run `gnio-run -n 2 gnio-info` for per-rank facts.)\n");
  }
  return 0;
}
