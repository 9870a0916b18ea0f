#include "bootstrap/local_rendezvous.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/fail.hpp"
#include "bootstrap/root_service.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {

namespace {

/// The port and writer in a rendezvous file, when it holds a live writer's port.
bool read_live_port(const std::string& path, std::uint16_t* port) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  unsigned p = 0;
  long long pid = 0;
  const bool parsed = std::fscanf(f, "%u %lld", &p, &pid) == 2;
  std::fclose(f);
  if (!parsed || p == 0 || p > 65535 || pid <= 0) return false;
  // A file of an earlier job with the same token whose rank 0 died: not this job's root.
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  *port = static_cast<std::uint16_t>(p);
  return true;
}

void publish(const std::string& path, std::uint16_t port) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f)
    fail_errno(
        "bootstrap: writing the rendezvous file %s (set GNIO_RENDEZVOUS_DIR to a writable "
        "directory every rank of this host sees, or MASTER_ADDR and MASTER_PORT)",
        tmp.c_str());
  std::fprintf(f, "%u %lld\n", static_cast<unsigned>(port), static_cast<long long>(::getpid()));
  const bool written = std::fclose(f) == 0;
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    (void)std::remove(tmp.c_str());
    errno = e;
    fail_errno("bootstrap: publishing the rendezvous file %s", path.c_str());
  }
}

}  // namespace

std::string rendezvous_path(std::uint64_t token) {
  std::string dir = config_text("GNIO_RENDEZVOUS_DIR");
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = t && *t ? t : "/tmp";
  }
  char name[64];
  std::snprintf(name, sizeof(name), "/gnio-rendezvous-%016" PRIx64, token);
  return dir + name;
}

std::unique_ptr<Bootstrap> join_on_this_host(const LaunchInfo& info, std::uint64_t token) {
  const std::string path = rendezvous_path(token);
  if (info.rank == 0) {
    auto root = std::make_unique<RootService>(SockAddr::resolve("127.0.0.1", 0, "loopback"), token);
    const SockAddr at = root->address();
    publish(path, at.port());
    GNIO_INFO(Bootstrap, "%s job on one host: root at %s, published in %s", info.source.c_str(),
              at.to_string().c_str(), path.c_str());
    // Removed however the join ends: every rank has read it once the join returns.
    struct Unlink {
      const std::string& p;
      ~Unlink() { (void)std::remove(p.c_str()); }
    } unlink{path};
    return TcpBootstrap::join(at, token, 0, info.size, std::move(root));
  }
  const double limit_s = config_seconds("GNIO_BOOTSTRAP_TIMEOUT");
  const auto start = std::chrono::steady_clock::now();
  std::uint16_t port = 0;
  for (auto pause = std::chrono::milliseconds(1); !read_live_port(path, &port);
       pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (limit_s > 0 && waited > limit_s)
      fail(ErrorClass::Timeout,
           "bootstrap: rank %d of %d waited %.0f s (GNIO_BOOTSTRAP_TIMEOUT) for rank 0 to publish "
           "its address in %s (%s job on one host without MASTER_ADDR): is rank 0 running, and "
           "does it see the same directory (GNIO_RENDEZVOUS_DIR, TMPDIR)?",
           info.rank, info.size, waited, path.c_str(), info.source.c_str());
    std::this_thread::sleep_for(pause);
  }
  return TcpBootstrap::join(SockAddr::resolve("127.0.0.1", port, "loopback"), token, info.rank,
                            info.size, nullptr);
}

}  // namespace gnio::bootstrap
