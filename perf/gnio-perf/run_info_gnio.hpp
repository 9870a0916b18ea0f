// The RunInfo fields that every gnio subcommand fills the same way from its communicator.
#pragma once

#include <string>

#include "gnio/comm.hpp"
#include "gnio/version.hpp"
#include "harness/report.hpp"

namespace gnio::perf {

/// Library, version, backend, device, ranks and command of a gnio run; the caller adds timing,
/// settings and definitions.
inline RunInfo gnio_run_info(const Comm& comm, const char* subcommand, const std::string& command) {
  RunInfo info;
  info.library = "gnio";
  info.subcommand = subcommand;
  info.version = version_string();
  info.backend = to_string(comm.backend());
  info.device = comm.device_description();
  info.ranks = comm.size();
  info.command = command;
  return info;
}

}  // namespace gnio::perf
