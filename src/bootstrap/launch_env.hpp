// Launcher environment: launch_info_from_env() (public, include/gnio/bootstrap.hpp) and the job
// token that Bootstrap::from_env() derives from it.
#pragma once

#include <cstdint>
#include <string>

#include "gnio/bootstrap.hpp"

namespace gnio::bootstrap {

/// The job token for Bootstrap::from_env(): GNIO_JOB_TOKEN (1 to 16 hex digits, optional "0x";
/// gnio-run sets a random one), else a hash of the launcher's job id (TORCHELASTIC_RUN_ID;
/// SLURM_JOB_ID + SLURM_STEP_ID; OMPI_MCA_orte_ess_jobid / OMPI_MCA_ess_base_jobid /
/// PMIX_NAMESPACE; for PMI only PMIX_NAMESPACE when present) together with the root address and
/// port.
///
/// The derived token is NOT a secret: anyone who can read the job's environment or guess the job
/// id can compute it. It keeps concurrent jobs that share hosts and ports from joining each other
/// and lets listeners drop stray traffic; it does not authenticate. Only variables that every rank
/// of a job sees with the same value are hashed, so all ranks derive the same token.
/// Throws Error(InvalidArgument) when GNIO_JOB_TOKEN is not hex.
std::uint64_t job_token_from_env(const LaunchInfo& info);

/// The launcher's job ids that job_token_from_env() hashes, as "|NAME=value" for each one set
/// (empty when the launcher named no job: then two jobs cannot be told apart by them).
std::string job_ids_from_env(const LaunchInfo& info);

/// Parses a job token ("0x1f", "DEADbeef"); false when it is not 1 to 16 hex digits.
bool parse_job_token(const char* text, std::uint64_t* token);

}  // namespace gnio::bootstrap
