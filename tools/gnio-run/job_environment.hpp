// The environment every rank starts with: torchrun-style variables, MASTER_PORT, the job token
// and, with --nodes, the simulated node each rank belongs to. Separate because it is decided once
// for the whole job before any rank starts, and it is the tool's whole contract with gnio's
// bootstrap (Bootstrap::from_env reads what it sets).
#pragma once

#include <string>
#include <vector>

#include "command_line.hpp"

namespace gnio::run {

/// The environment of every rank: gnio-run's own environment minus the variables gnio-run sets,
/// plus the per-rank values, as "NAME=value" strings.
class JobEnvironment {
 public:
  /// Decides the job-wide values (port, token, node id base) once.
  explicit JobEnvironment(const Options& opt);

  /// "NAME=value" strings for rank `rank`.
  std::vector<std::string> for_rank(int rank) const;

  int master_port() const { return master_port_; }
  /// The generated token, or empty when GNIO_JOB_TOKEN was passed through from the environment.
  const std::string& generated_token() const { return token_; }

 private:
  const Options& opt_;
  int master_port_ = 0;
  std::string token_;
  std::string node_base_;
};

}  // namespace gnio::run
