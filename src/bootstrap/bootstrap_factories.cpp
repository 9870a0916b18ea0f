// Bootstrap::create and Bootstrap::from_env: which rendezvous a job's launcher calls for (a unique
// id, PMIx, a file on this host, or MASTER_ADDR with rank 0 hosting the root), ending in a
// TcpBootstrap. Separate from TcpBootstrap itself, which does not care how its root was found.
#include <memory>
#include <string>

#include "base/fail.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/local_rendezvous.hpp"
#include "bootstrap/pmix_rendezvous.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio {

std::unique_ptr<Bootstrap> Bootstrap::create(const UniqueId& id, int rank, int size) {
  GNIO_REQUIRE(size >= 1 && size <= bootstrap::kMaxRanks,
               "Bootstrap::create: size %d is outside 1..%d", size, bootstrap::kMaxRanks);
  GNIO_REQUIRE(rank >= 0 && rank < size, "Bootstrap::create: rank %d is outside 0..%d", rank,
               size - 1);
  auto fields = bootstrap::decode_unique_id(id.bytes, sizeof(id.bytes));
  GNIO_REQUIRE(fields.has_value(),
               "Bootstrap::create: the unique id is not valid (not made by create_unique_id() of "
               "this gnio version, or damaged in transit)");
  return bootstrap::TcpBootstrap::join(bootstrap::SockAddr::from_net(fields->root), fields->token,
                                       rank, size, nullptr);
}

std::unique_ptr<Bootstrap> Bootstrap::from_env() {
  LaunchInfo info = launch_info_from_env();
  bool launcher_has_master = info.source == "torchrun" || info.source == "gnio-run";
  // Every rank on this host and no address given (a plain mpirun or srun on one machine): meet on
  // the loopback, the port set or published in a file named after the job.
  const bool one_host = info.local_size == info.size;
  // A PMIx launcher (mpirun, srun --mpi=pmix) and no address given: meet through its server, on
  // any number of hosts.
  if (info.root_host.empty() && info.root_port <= 0 && !launcher_has_master &&
      bootstrap::pmix_launched()) {
    const std::string unavailable = bootstrap::pmix_unavailable_reason();
    if (unavailable.empty())
      return bootstrap::join_through_pmix(info, bootstrap::job_token_from_env(info));
    if (!one_host)
      fail(ErrorClass::InvalidArgument,
           "Bootstrap::from_env: %s started this job through PMIx across hosts, but %s: set "
           "MASTER_ADDR (or GNIO_BOOTSTRAP_ADDR) to the host of rank 0 and GNIO_BOOTSTRAP_PORT "
           "(or MASTER_PORT) to a free port there, for every rank",
           info.source.c_str(), unavailable.c_str());
    GNIO_INFO(Bootstrap, "PMIx rendezvous unavailable (%s): meeting through a file on this host",
              unavailable.c_str());
  }
  if (info.root_host.empty() && !launcher_has_master && one_host) {
    if (info.root_port > 0) {
      info.root_host = "127.0.0.1";
    } else if (!bootstrap::job_ids_from_env(info).empty() ||
               !config_text("GNIO_JOB_TOKEN").empty()) {
      return bootstrap::join_on_this_host(info, bootstrap::job_token_from_env(info));
    }
  }
  if (info.root_host.empty()) {
    if (launcher_has_master)
      fail(ErrorClass::InvalidArgument,
           "Bootstrap::from_env: MASTER_ADDR is not set; torchrun and gnio-run set it (set "
           "MASTER_ADDR and MASTER_PORT to rank 0's host and a free port)");
    fail(ErrorClass::InvalidArgument,
         "Bootstrap::from_env: %s gives no rendezvous address%s: set MASTER_ADDR (or "
         "GNIO_BOOTSTRAP_ADDR) to the host of rank 0 and GNIO_BOOTSTRAP_PORT (or MASTER_PORT) to "
         "a free port there, for every rank",
         info.source.c_str(),
         one_host               ? " and no job id to meet on this host by (set GNIO_JOB_TOKEN to "
                                  "the same hex value on every rank, or the address below)"
         : info.local_size == 0 ? " and does not say whether every rank runs on this host"
                                : " and the ranks span hosts");
  }
  if (info.root_port <= 0) {
    if (launcher_has_master)
      fail(ErrorClass::InvalidArgument,
           "Bootstrap::from_env: MASTER_PORT is not set; torchrun and gnio-run set it (or set "
           "GNIO_BOOTSTRAP_PORT)");
    fail(ErrorClass::InvalidArgument,
         "Bootstrap::from_env: %s gives no rendezvous port: set GNIO_BOOTSTRAP_PORT (or "
         "MASTER_PORT) to a free port on rank 0's host, for every rank",
         info.source.c_str());
  }
  std::uint64_t token = bootstrap::job_token_from_env(info);
  auto root = bootstrap::SockAddr::resolve(
      info.root_host, static_cast<std::uint16_t>(info.root_port), "MASTER_ADDR");
  std::unique_ptr<bootstrap::RootService> own_root;
  if (info.rank == 0) {
    // Rank 0 hosts the root on the advertised address. If MASTER_ADDR is not one of this host's
    // addresses (a NAT or a name that resolves elsewhere), listen on all of them instead.
    bootstrap::SockAddr bind_addr = root;
    if (!bootstrap::is_local_address(root)) {
      GNIO_WARN(Bootstrap,
                "MASTER_ADDR %s (%s) is not an address of this host (rank 0); the root "
                "listens on all interfaces, port %d",
                info.root_host.c_str(), root.host_string().c_str(), info.root_port);
      bind_addr = root.wildcard();
    }
    own_root = std::make_unique<bootstrap::RootService>(bind_addr, token);
  }
  return bootstrap::TcpBootstrap::join(root, token, info.rank, info.size, std::move(own_root));
}

}  // namespace gnio
