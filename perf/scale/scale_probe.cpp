// gnio-scale-probe: what one communicator costs each rank, and how long creating one and running a
// small allreduce take, at the job's size. Run under a launcher, e.g.
//
//   gnio-run -n 16 --nodes 8 -- gnio-scale-probe [--reps R] [--json FILE]
//
// Per rank, measured around the communicator this program joins first (Comm::from_env): threads
// (/proc/self/task), open file descriptors and the sockets among them (/proc/self/fd), and
// resident memory (VmRSS), each as the growth from before creation to after the first allreduce
// (connections made on first use count); the first allreduce is a 1 KiB float allreduce timed as
// the average per call of 20 eager calls after 3 warm-ups (every element checked: integer-valued
// floats whose sums are exact). Then the time to create a second communicator from a unique id,
// the slowest rank's, median of R repetitions (perf/harness/creation_timing.hpp, as init_bench),
// with the CPU time the busiest rank's process spent on it (all threads: the work per rank, which
// wall time hides once the ranks outnumber the cores). Last, the CPU an idle communicator costs:
// each process's CPU time over one second (--idle S) in which the communicator exists and nothing is posted
// (proxy threads waiting for descriptors, liveness heartbeats), in cores.
// Rank 0 prints one line per figure and, with --json, one JSON object (bench/scale-fit.py reads
// them).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "harness/creation_timing.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/stream.hpp"

namespace {

using gnio_bench::now_ms;

/// This process's threads, open descriptors, sockets among them and resident kilobytes.
struct Footprint {
  double threads = 0, fds = 0, sockets = 0, rss_kib = 0;
};

int count_entries(const char* dir, bool sockets_only) {
  DIR* d = ::opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (sockets_only) {
      char link[64];
      const std::string path = std::string(dir) + "/" + e->d_name;
      const ssize_t len = ::readlink(path.c_str(), link, sizeof(link) - 1);
      if (len <= 0) continue;
      link[len] = '\0';
      if (std::strncmp(link, "socket:", 7) != 0) continue;
    }
    ++n;
  }
  ::closedir(d);
  return n;
}

Footprint footprint() {
  Footprint f;
  f.threads = count_entries("/proc/self/task", false);
  // opendir itself holds one descriptor while counting.
  f.fds = count_entries("/proc/self/fd", false) - 1;
  f.sockets = count_entries("/proc/self/fd", true);
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) f.rss_kib = std::atof(line.c_str() + 6);
  return f;
}

/// Every rank's value, gathered.
std::vector<double> gather(gnio::Bootstrap& bs, double v) {
  std::vector<double> all(static_cast<std::size_t>(bs.size()));
  all[static_cast<std::size_t>(bs.rank())] = v;
  bs.allgather(all.data(), sizeof(double));
  return all;
}

struct Spread {
  double max, mean;
};
Spread spread(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {*std::max_element(v.begin(), v.end()), sum / static_cast<double>(v.size())};
}

/// 1 KiB of floats: rank r's element i is (r + i) % 64, so every sum is an integer below 2^24.
std::uint64_t allreduce_errors(gnio::Comm& comm, gnio::Stream& stream, float* send, float* recv,
                               std::size_t count, int iters, double* us_per_call) {
  const int n = comm.size(), me = comm.rank();
  std::vector<float> in(count), out(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((me + i) % 64);
  comm.copy(send, in.data(), count * sizeof(float), stream);
  comm.fill(recv, 0x7f, count * sizeof(float), stream);  // poisoned: NaN-like garbage
  for (int w = 0; w < 3; ++w)
    gnio::allreduce(comm, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, stream);
  comm.synchronize(stream);
  comm.bootstrap().barrier();
  const double t0 = now_ms();
  for (int it = 0; it < iters; ++it)
    gnio::allreduce(comm, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, stream);
  comm.synchronize(stream);
  *us_per_call = (now_ms() - t0) * 1e3 / iters;
  comm.copy(out.data(), recv, count * sizeof(float), stream);
  comm.synchronize(stream);
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<double>((r + i) % 64);
    wrong += out[i] != static_cast<float>(want);
  }
  return wrong;
}

void usage() {
  std::puts(
      "usage: gnio-scale-probe [--reps R] [--idle S] [--json FILE]   (under a launcher: gnio-run, mpirun, "
      "...)\n"
      "per-rank threads, descriptors, sockets and resident memory of one communicator, the time\n"
      "to create one (slowest rank, median of R, default 3), a 1 KiB allreduce and the CPU an\n"
      "idle communicator uses (over S seconds, default 1)");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  double idle_s = 1;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--idle" && i + 1 < argc) {
      idle_s = std::max(0.1, std::atof(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  const Footprint before = footprint();
  const double t_env = now_ms();
  gnio::Comm comm = gnio::Comm::from_env();
  const double env_ms = now_ms() - t_env;
  gnio::Bootstrap& bs = comm.bootstrap();
  const int rank = comm.rank(), size = comm.size();
  gnio::Stream stream(comm);
  constexpr std::size_t kCount = 256;
  auto* send = static_cast<float*>(comm.alloc_device(kCount * sizeof(float)));
  auto* recv = static_cast<float*>(comm.alloc_device(kCount * sizeof(float)));
  double ar_us = 0;
  std::uint64_t wrong = allreduce_errors(comm, stream, send, recv, kCount, 20, &ar_us);
  const Footprint after = footprint();
  bs.barrier();
  const double idle_cpu0 = gnio_bench::process_cpu_ms(), idle_t0 = now_ms();
  ::usleep(static_cast<useconds_t>(idle_s * 1e6));
  const double idle_cores =
      (gnio_bench::process_cpu_ms() - idle_cpu0) / std::max(1.0, now_ms() - idle_t0);

  std::vector<double> create_cpu_ms;
  const gnio_bench::Summary create =
      gnio_bench::summarize(gnio_bench::time_creation_from_unique_id(bs, reps, &create_cpu_ms));
  const gnio_bench::Summary create_cpu = gnio_bench::summarize(create_cpu_ms);

  const Spread threads = spread(gather(bs, after.threads - before.threads));
  const Spread fds = spread(gather(bs, after.fds - before.fds));
  const Spread sockets = spread(gather(bs, after.sockets - before.sockets));
  const Spread rss = spread(gather(bs, (after.rss_kib - before.rss_kib) / 1024.0));
  const Spread ar = spread(gather(bs, ar_us));
  const Spread env = spread(gather(bs, env_ms));
  const Spread idle = spread(gather(bs, idle_cores));
  double total_wrong = 0;
  for (double w : gather(bs, static_cast<double>(wrong))) total_wrong += w;
  if (rank == 0) {
    std::printf("# gnio-scale-probe: %d ranks on %d nodes (%d on this one), backend %s\n", size,
                comm.nodes(), comm.local_size(), gnio::to_string(comm.backend()));
    std::printf("%-40s %10s %10s\n", "per rank, one communicator", "max", "mean");
    std::printf("%-40s %10.0f %10.1f\n", "threads", threads.max, threads.mean);
    std::printf("%-40s %10.0f %10.1f\n", "file descriptors", fds.max, fds.mean);
    std::printf("%-40s %10.0f %10.1f\n", "sockets", sockets.max, sockets.mean);
    std::printf("%-40s %10.1f %10.1f\n", "resident memory (MiB)", rss.max, rss.mean);
    std::printf("%-40s %10.2f %10.2f\n", "Comm::from_env (ms, launcher included)", env.max,
                env.mean);
    std::printf("%-40s %10.2f (min %.2f, max %.2f, %d reps)\n",
                "Comm::from_unique_id (ms, slowest rank)", create.median, create.min, create.max,
                reps);
    std::printf("%-40s %10.2f (min %.2f, max %.2f)\n", "  CPU ms of the busiest rank's process",
                create_cpu.median, create_cpu.min, create_cpu.max);
    std::printf("%-40s %10.1f %10.1f\n", "allreduce 1 KiB (us per call)", ar.max, ar.mean);
    std::printf("%-40s %10.3f %10.3f\n", "CPU of an idle communicator (cores)", idle.max,
                idle.mean);
    std::printf("# %s\n", total_wrong == 0 ? "all data checks passed"
                                           : "DATA CHECK FAILED: wrong allreduce elements");
    if (json) {
      FILE* f = std::fopen(json, "w");
      if (f) {
        std::fprintf(f,
                     "{\"schema\": \"gnio-scale/1\", \"ranks\": %d, \"nodes\": %d, "
                     "\"ranks_per_node\": %d, \"backend\": \"%s\", \"threads_max\": %.0f, "
                     "\"threads_mean\": %.2f, \"fds_max\": %.0f, \"fds_mean\": %.2f, "
                     "\"sockets_max\": %.0f, \"sockets_mean\": %.2f, \"rss_mib_max\": %.2f, "
                     "\"rss_mib_mean\": %.2f, \"from_env_ms_max\": %.3f, \"create_ms\": %.3f, "
                     "\"create_ms_min\": %.3f, \"create_ms_max\": %.3f, \"create_cpu_ms\": %.3f, "
                     "\"allreduce_us_max\": %.2f, \"idle_cores_max\": %.4f, "
                     "\"idle_cores_mean\": %.4f, \"wrong\": %.0f}\n",
                     size, comm.nodes(), comm.local_size(), gnio::to_string(comm.backend()),
                     threads.max, threads.mean, fds.max, fds.mean, sockets.max, sockets.mean,
                     rss.max, rss.mean, env.max, create.median, create.min, create.max,
                     create_cpu.median, ar.max, idle.max, idle.mean, total_wrong);
        std::fclose(f);
      }
    }
  }
  comm.free_device(send);
  comm.free_device(recv);
  return total_wrong == 0 ? 0 : 1;
}
