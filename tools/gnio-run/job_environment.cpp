#include "job_environment.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "exit_status.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"
#include "tool_output.hpp"

extern char** environ;

namespace gnio::run {
namespace {

/// Binds a TCP socket on all addresses to `port` (0: any free one). Returns the socket, or -1;
/// `*bound` receives the port. No SO_REUSEADDR, so a port in TIME_WAIT counts as busy.
int bind_tcp(int port, int* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

/// Picks MASTER_PORT: a port P such that P and P+1 (gnio's default bootstrap port) can both be
/// bound right now. Both are released before the ranks start, so another process could still
/// take them in between; the ranks then fail to bind and say so.
int pick_master_port() {
  int fallback = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    int port = 0;
    int first = bind_tcp(0, &port);
    if (first < 0) break;
    if (!fallback) fallback = port;
    int next_port = 0;
    int second = port < 65535 ? bind_tcp(port + 1, &next_port) : -1;
    ::close(first);
    if (second >= 0) {
      ::close(second);
      return port;
    }
  }
  if (!fallback) {
    say("cannot bind any TCP port to choose MASTER_PORT (%s)", std::strerror(errno));
    std::exit(kExitInternal);
  }
  GNIO_WARN(Tool, "gnio-run: found no free port P with P+1 free as well; using MASTER_PORT=%d",
            fallback);
  return fallback;
}

/// A random 64-bit job token as 16 hex digits, from /dev/urandom (getrandom() as a fallback).
std::string random_token() {
  unsigned long long value = 0;
  bool ok = false;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ok = ::read(fd, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value));
    ::close(fd);
  }
  if (!ok) ok = ::getrandom(&value, sizeof(value), 0) == static_cast<ssize_t>(sizeof(value));
  if (!ok) {
    say("cannot read random bytes for GNIO_JOB_TOKEN (%s)", std::strerror(errno));
    std::exit(kExitInternal);
  }
  return strf("%016llx", value);
}

/// This machine's host name, for simulated node ids.
std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "localhost";
  return name;
}

}  // namespace

JobEnvironment::JobEnvironment(const Options& opt) : opt_(opt) {
  master_port_ = pick_master_port();
  std::string token = config_text("GNIO_JOB_TOKEN");
  // An empty token means "none" in the config table, so it gets a fresh one like an unset one.
  token_ = token.empty() ? random_token() : std::string();
  if (opt.nodes > 0) {
    std::string user_node = config_text("GNIO_NODE_ID");
    node_base_ = user_node.empty() ? host_name() : user_node;
  }
}

std::vector<std::string> JobEnvironment::for_rank(int rank) const {
  int nodes = opt_.nodes > 0 ? opt_.nodes : 1;
  int per_node = opt_.ranks / nodes;
  int node = rank / per_node;
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(opt_.ranks)},
      {"LOCAL_RANK", std::to_string(rank % per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
      {"GROUP_RANK", std::to_string(node)},
      {"GROUP_WORLD_SIZE", std::to_string(nodes)},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(master_port_)},
  };
  if (!token_.empty()) set.emplace_back("GNIO_JOB_TOKEN", token_);
  if (opt_.nodes > 0) {
    set.emplace_back("GNIO_NODE_ID", node_base_ + "/sim" + std::to_string(node));
    // Every simulated node runs on this machine: GPUs are picked by this index, not LOCAL_RANK.
    set.emplace_back("GNIO_MACHINE_LOCAL_RANK", std::to_string(rank));
  }

  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [key, unused] : set) overridden = overridden || name == key;
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [key, val] : set) env.push_back(key + "=" + val);
  return env;
}

}  // namespace gnio::run
