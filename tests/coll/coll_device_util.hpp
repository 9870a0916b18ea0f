// Shared pieces of the device-API collective tests (coll_device_*_test.cpp): collectives called
// inside already running kernels, one group per rank.
#pragma once

#include <vector>

#include "coll/coll_test_util.hpp"
#include "gnio/device/coll.hpp"

namespace coll_device_test {

inline bool host() {
  return gnio_test::comm().backend() == gnio::Backend::Host;
}

/// True when `algo` can run on this communicator: every algorithm on one node; across nodes
/// Auto, OneShot (through the pipes there) and Ring (LL and TwoShot return Unsupported:
/// tests/rma/rma_net_test.cpp).
inline bool runs_here(gnio::CollAlgo algo) {
  return gnio_test::comm().nodes() == 1 || algo == gnio::CollAlgo::Auto ||
         algo == gnio::CollAlgo::OneShot || algo == gnio::CollAlgo::Ring;
}

/// The algorithms to pass at run time (a CollAlgo value: the kernel compiles every algorithm).
inline std::vector<gnio::CollAlgo> algorithms() {
  std::vector<gnio::CollAlgo> all;
  for (gnio::CollAlgo a : {gnio::CollAlgo::Auto, gnio::CollAlgo::LL, gnio::CollAlgo::OneShot,
                           gnio::CollAlgo::TwoShot, gnio::CollAlgo::Ring})
    if (runs_here(a)) all.push_back(a);
  return all;
}

/// Calls f(tag) with the compile-time tag (gnio::algo::*) of every explicit algorithm that runs
/// here: each kernel f launches compiles that algorithm alone.
template <class F>
void for_each_algorithm_tag(F&& f) {
  if (runs_here(gnio::CollAlgo::LL)) f(gnio::algo::ll);
  f(gnio::algo::oneshot);
  if (runs_here(gnio::CollAlgo::TwoShot)) f(gnio::algo::twoshot);
  f(gnio::algo::ring);
}

}  // namespace coll_device_test
