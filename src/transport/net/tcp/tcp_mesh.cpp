#include "transport/net/tcp/tcp_mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "gnio/log.hpp"

namespace gnio::net {
namespace {

constexpr std::uint32_t kHelloMagic = 0x474e5448;  // "GNTH"

/// The first bytes on every connection: who calls whom, in which job.
struct Hello {
  std::uint32_t magic;
  std::int32_t from;
  std::int32_t to;
  std::uint32_t lane;
  std::uint64_t token;
};

/// The address to listen on: the bootstrap's interface when it has one (so peers reach this rank
/// the way they reached the bootstrap), else the usual interface choice.
bootstrap::SockAddr listen_here(Bootstrap& bs) {
  if (auto* tcp = dynamic_cast<bootstrap::TcpBootstrap*>(&bs)) {
    bootstrap::SockAddr a = tcp->listen_address();
    a.set_port(0);
    return a;
  }
  return bootstrap::choose_rank_address(*bootstrap::SockAddr::parse_numeric("127.0.0.1", 0));
}

}  // namespace

TcpMesh::TcpMesh(Bootstrap& bs, const std::vector<int>& node_of_rank, double timeout_s, int lanes)
    : lanes_(lanes) {
  const int me = bs.rank();
  const int size = bs.size();
  fds_.resize(static_cast<std::size_t>(size) * static_cast<std::size_t>(lanes));
  for (int r = 0; r < size; ++r)
    if (node_of_rank[r] != node_of_rank[me]) peers_.push_back(r);

  // Every pair must open the same connections: a rank that asked for another count would wait
  // for lanes that never come.
  std::vector<std::int32_t> asked(size);
  asked[me] = lanes;
  bs.allgather(asked.data(), sizeof(std::int32_t));
  for (int r = 0; r < size; ++r)
    if (asked[r] != lanes)
      fail(ErrorClass::InvalidArgument,
           "rank %d: GNIO_NET_NSOCKS is %d here but %d on rank %d; set the same value on every "
           "rank",
           me, lanes, asked[r], r);

  bootstrap::Fd listener = bootstrap::listen_tcp(listen_here(bs), "the tcp transport (GNIO_NET)");
  std::vector<bootstrap::NetAddress> addrs(size);
  addrs[me] = bootstrap::local_address(listener.get()).to_net();
  bs.allgather(addrs.data(), sizeof(bootstrap::NetAddress));

  const Deadline deadline = Deadline::after(timeout_s);
  // Connect to lower remote ranks first: connect() completes against the peer's listen backlog,
  // so no rank waits on another's accept loop and the order cannot deadlock.
  int to_accept = 0;
  for (int p : peers_) {
    if (p > me) {
      to_accept += lanes;
      continue;
    }
    const bootstrap::SockAddr to = bootstrap::SockAddr::from_net(addrs[p]);
    for (int lane = 0; lane < lanes; ++lane) {
      int err = 0;
      bootstrap::Fd fd = bootstrap::connect_tcp(to, deadline, &err);
      if (!fd)
        fail(ErrorClass::SystemError,
             "rank %d: tcp transport could not connect to rank %d at %s: %s; check that the "
             "nodes reach each other on that interface (GNIO_SOCKET_IFNAME)",
             me, p, to.to_string().c_str(), std::strerror(err));
      bootstrap::set_nodelay(fd.get());
      Hello h{kHelloMagic, me, p, static_cast<std::uint32_t>(lane), bs.token()};
      if (bootstrap::send_all(fd.get(), &h, sizeof(h), nullptr, 0, deadline, &err) !=
          bootstrap::IoStatus::Ok)
        fail(ErrorClass::RemoteError, "rank %d: tcp transport: hello to rank %d failed: %s", me, p,
             std::strerror(err));
      fds_[connection(p, lane)] = std::move(fd);
    }
  }
  bootstrap::DropLog drops(format("rank %d tcp transport listener", me));
  while (to_accept > 0) {
    if (bootstrap::poll_one(listener.get(), POLLIN, deadline) <= 0)
      fail(ErrorClass::Timeout,
           "rank %d: tcp transport: %d remote rank(s) did not connect within %.0f s (GNIO_TIMEOUT)",
           me, to_accept, timeout_s);
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    bootstrap::Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) continue;  // EAGAIN or a connection that went away: poll again
    const bootstrap::SockAddr from(reinterpret_cast<sockaddr*>(&ss), len);
    Hello h{};
    int err = 0;
    // A short bound of its own: a silent client must not hold the listener.
    const Deadline hello_deadline = Deadline::after(5);
    if (bootstrap::recv_all(fd.get(), &h, sizeof(h), hello_deadline, &err) !=
        bootstrap::IoStatus::Ok) {
      drops.drop(from.host_string(), from.to_string(), "no complete hello");
      continue;
    }
    if (h.magic != kHelloMagic || h.token != bs.token() || h.to != me || h.from <= me ||
        h.from >= size || h.lane >= static_cast<std::uint32_t>(lanes) ||
        node_of_rank[h.from] == node_of_rank[me] ||
        fds_[connection(h.from, static_cast<int>(h.lane))]) {
      drops.drop(from.host_string(), from.to_string(),
                 "bad hello (wrong job, rank, lane or duplicate)");
      continue;
    }
    bootstrap::set_nodelay(fd.get());
    fds_[connection(h.from, static_cast<int>(h.lane))] = std::move(fd);
    --to_accept;
  }
  GNIO_INFO(Net, "rank %d: tcp transport connected to %zu remote rank(s), %d socket(s) each", me,
            peers_.size(), lanes);
}

}  // namespace gnio::net
