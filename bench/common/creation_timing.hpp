// Communicator creation timed one way in every benchmark that reports it (init_bench,
// gnio-scale-probe): from a unique id broadcast beforehand, every rank released by a barrier, the
// figure of a repetition the slowest rank's milliseconds.
#pragma once

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

/// `reps` creations (and destructions) of a communicator over the ranks of `bs` by
/// Comm::from_unique_id; per repetition the slowest rank's milliseconds. Collective over `bs`.
inline std::vector<double> time_creation_from_unique_id(gnio::Bootstrap& bs, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    gnio::UniqueId id{};
    if (bs.rank() == 0) id = gnio::create_unique_id();
    bs.broadcast(&id, sizeof(id), 0);
    bs.barrier();
    const double t0 = now_ms();
    {
      gnio::Comm c = gnio::Comm::from_unique_id(id, bs.rank(), bs.size());
      ms.push_back(max_over_ranks(bs, now_ms() - t0));
    }
    bs.barrier();
  }
  return ms;
}

}  // namespace gnio_bench
