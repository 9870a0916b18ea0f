// One validated host collective call over one team on one channel: its kernel arguments, its
// algorithm (forced or chosen), its launch shape, its pieces and staging, and their launches.
#pragma once

#include "coll/coll_request.hpp"
#include "coll/coll_state.hpp"
#include "gnio/coll.hpp"

namespace gnio::detail {

/// The whole call as one set of kernel arguments (before chunking).
CollArgs full_args(const Comm& comm, const Request& r);

/// The algorithm of a call: the forced one (GNIO_ALGO, coll_set_algorithm) or Auto's choice. A
/// forced algorithm that needs peer memory (LL, TwoShot; OneShot runs through the pipes there)
/// gives way to Ring on a team that spans nodes (once said in the log): the same setting then
/// works for a job on one node and on several.
CollAlgo resolve(CollState& st, const CollComm& cc, const CollArgs& full);

/// Enqueues a validated call over `team` on channel `ch`.
void enqueue(Comm& comm, CollState& st, const CollChannel& ch, const Team& team, const Request& r,
             StreamRef stream);

}  // namespace gnio::detail
