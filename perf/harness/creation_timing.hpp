// Communicator creation timed one way in every benchmark that reports it (init_bench,
// gnio-scale-probe): from a unique id broadcast beforehand, every rank released by a barrier, the
// figure of a repetition the slowest rank's milliseconds.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/comm.hpp"

namespace gnio_bench {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The slowest rank's value. Collective over `bs`.
inline double max_over_ranks(gnio::Bootstrap& bs, double v) {
  std::vector<double> all(static_cast<std::size_t>(bs.size()));
  all[static_cast<std::size_t>(bs.rank())] = v;
  bs.allgather(all.data(), sizeof(double));
  return *std::max_element(all.begin(), all.end());
}

struct Summary {
  double median, min, max;
};
inline Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

/// CPU time this process (all its threads) has used, in milliseconds.
inline double process_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return (static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/// `reps` creations (and destructions) of a communicator over the ranks of `bs` by
/// Comm::from_unique_id; per repetition the slowest rank's milliseconds. Collective over `bs`.
/// With `cpu_ms`: per repetition also the most CPU time any rank's process spent meanwhile (all
/// its threads): the work creation costs a rank, which wall time shows only while the ranks have
/// cores to themselves.
inline std::vector<double> time_creation_from_unique_id(gnio::Bootstrap& bs, int reps,
                                                        std::vector<double>* cpu_ms = nullptr) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    gnio::UniqueId id{};
    if (bs.rank() == 0) id = gnio::create_unique_id();
    bs.broadcast(&id, sizeof(id), 0);
    bs.barrier();
    const double t0 = now_ms(), cpu0 = process_cpu_ms();
    {
      gnio::Comm c = gnio::Comm::from_unique_id(id, bs.rank(), bs.size());
      const double wall = now_ms() - t0, cpu = process_cpu_ms() - cpu0;
      ms.push_back(max_over_ranks(bs, wall));
      if (cpu_ms) cpu_ms->push_back(max_over_ranks(bs, cpu));
    }
    bs.barrier();
  }
  return ms;
}

}  // namespace gnio_bench
