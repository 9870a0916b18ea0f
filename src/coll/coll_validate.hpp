// The checks of a host collective call before any effect: this rank's (validate, check_stream)
// and, with GNIO_CHECK=1, every rank's together (cross_check, over coll_check.hpp's records).
#pragma once

#include "coll/coll_request.hpp"
#include "coll/coll_state.hpp"
#include "core/comm_services.hpp"
#include "gnio/coll.hpp"

namespace gnio::detail {

void check_stream(const Comm& comm, StreamRef stream);

/// Checks everything that can be checked before any effect; throws InvalidArgument.
void validate(const Comm& comm, const Request& r);

/// GNIO_CHECK=1: checks this rank's arguments, exchanges what every rank must agree on through
/// the bootstrap, and throws on every rank (before anything is enqueued) when a rank's own checks
/// failed or the ranks disagree. A rank whose own checks failed throws its own error; the others
/// throw InvalidArgument naming it.
void cross_check(const Comm& comm, const CommServices& core, CollState& st, const Request& r,
                 StreamRef stream);

}  // namespace gnio::detail
