// Rendezvous of a job whose ranks all run on one host when the launcher publishes no address
// (mpirun, srun or a PMI launcher without MASTER_ADDR): rank 0's root listens on the loopback and
// publishes its port in a file named after the job token; the other ranks wait for that file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gnio/bootstrap.hpp"

namespace gnio::bootstrap {

/// The file through which the ranks of the job with `token` meet: GNIO_RENDEZVOUS_DIR (else
/// TMPDIR, else /tmp) / gnio-rendezvous-<token in hex>.
std::string rendezvous_path(std::uint64_t token);

/// Joins the job described by `info` (every rank on this host) with job token `token`. Rank 0
/// starts the root on 127.0.0.1 (a free port) and writes "<port> <pid>" to rendezvous_path(token)
/// (atomically: a temporary file renamed), removing it once every rank joined; the others wait
/// for a file whose writer is alive (a file left by a dead job of the same token is ignored) for
/// up to GNIO_BOOTSTRAP_TIMEOUT. Throws Error(Timeout) naming the file when none appears in time.
std::unique_ptr<Bootstrap> join_on_this_host(const LaunchInfo& info, std::uint64_t token);

}  // namespace gnio::bootstrap
