#include "transport/net/tcp/tcp_mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "gnio/log.hpp"

namespace gnio::net {
namespace {

constexpr std::uint32_t kHelloMagic = 0x474e5448;  // "GNTH"
/// How long a connection may take to send its hello before the listener drops it.
constexpr auto kHelloWait = std::chrono::seconds(5);

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

/// An accepted connection whose hello has not fully arrived.
struct TcpMesh::Greeting {
  bootstrap::Fd fd;
  Hello hello{};
  std::size_t have = 0;
  std::chrono::steady_clock::time_point until;
  std::string peer, peer_host;
};

TcpMesh::TcpMesh(Bootstrap& bs, const std::vector<int>& node_of_rank, double timeout_s,
                 LaneRequest lanes, Connect connect)
    : me_(bs.rank()),
      token_(bs.token()),
      timeout_s_(timeout_s),
      connect_(connect),
      drops_(format("rank %d tcp transport listener", bs.rank())) {
  const int size = bs.size();
  // Every pair must open the same connections the same way: a rank that ended with another count
  // would wait for lanes that never come.
  struct Asked {
    std::int32_t lanes;  // 0: the mesh's choice
    std::int32_t preferred;
    std::int32_t at_creation;
  };
  std::vector<Asked> asked(size);
  asked[me_] = {lanes.asked, lanes.preferred, connect == Connect::AtCreation};
  bs.allgather(asked.data(), sizeof(Asked));
  int chosen = 0;
  for (const Asked& a : asked)
    if (a.lanes == 0 && (chosen == 0 || a.preferred < chosen)) chosen = a.preferred;
  const auto settled = [&](const Asked& a) { return a.lanes != 0 ? a.lanes : chosen; };
  const auto said = [&](const Asked& a) {
    return a.lanes != 0 ? format("%d", a.lanes) : format("0 (the default: %d)", chosen);
  };
  lanes_ = settled(asked[me_]);
  for (int r = 0; r < size; ++r) {
    if (settled(asked[r]) != lanes_)
      fail(ErrorClass::InvalidArgument,
           "rank %d: GNIO_NET_NSOCKS is %s here but %s on rank %d; set the same value on every "
           "rank",
           me_, said(asked[me_]).c_str(), said(asked[r]).c_str(), r);
    if (asked[r].at_creation != asked[me_].at_creation)
      fail(ErrorClass::InvalidArgument,
           "rank %d: GNIO_NET_CONNECT is %s here but %s on rank %d; set the same value on every "
           "rank",
           me_, asked[me_].at_creation ? "eager" : "lazy", asked[r].at_creation ? "eager" : "lazy",
           r);
  }
  const std::size_t n = static_cast<std::size_t>(size) * static_cast<std::size_t>(lanes_);
  send_.resize(n);
  receive_.resize(n);
  opened_fds_.assign(n, -1);
  accepted_.assign(n, false);
  remote_.assign(static_cast<std::size_t>(size), false);
  for (int r = 0; r < size; ++r)
    if (node_of_rank[r] != node_of_rank[me_]) {
      peers_.push_back(r);
      remote_[r] = true;
    }

  listener_ = bootstrap::listen_tcp(listen_here(bs), "the tcp transport (GNIO_NET)");
  addrs_.resize(static_cast<std::size_t>(size));
  addrs_[me_] = bootstrap::local_address(listener_.get()).to_net();
  bs.allgather(addrs_.data(), sizeof(bootstrap::NetAddress));
  if (connect_ == Connect::OnFirstUse) {
    GNIO_INFO(Net,
              "rank %d: tcp transport: %zu remote rank(s), %d connection(s) per pair, opened "
              "on first use",
              me_, peers_.size(), lanes_);
    return;
  }

  const Deadline deadline = Deadline::after(timeout_s);
  // Connect to lower remote ranks first: connect() completes against the peer's listen backlog,
  // so no rank waits on another's accept loop and the order cannot deadlock.
  int to_accept = 0;
  for (int p : peers_) {
    if (p > me_) {
      to_accept += lanes_;
      continue;
    }
    for (int lane = 0; lane < lanes_; ++lane) {
      int err = 0;
      if (send_fd(p, lane, &err) < 0)
        fail(ErrorClass::SystemError,
             "rank %d: tcp transport could not connect to rank %d at %s: %s; check that the "
             "nodes reach each other on that interface (GNIO_SOCKET_IFNAME)",
             me_, p, bootstrap::SockAddr::from_net(addrs_[p]).to_string().c_str(),
             std::strerror(err));
    }
  }
  while (to_accept > 0) {
    if (bootstrap::poll_one(listener_.get(), POLLIN, deadline) <= 0)
      fail(ErrorClass::Timeout,
           "rank %d: tcp transport: %d remote rank(s) did not connect within %.0f s (GNIO_TIMEOUT)",
           me_, to_accept, timeout_s);
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    bootstrap::Fd fd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) continue;  // EAGAIN or a connection that went away: poll again
    const bootstrap::SockAddr from(reinterpret_cast<sockaddr*>(&ss), len);
    Hello h{};
    int err = 0;
    // A short bound of its own: a silent client must not hold the listener.
    if (bootstrap::recv_all(fd.get(), &h, sizeof(h), Deadline::after(5), &err) !=
        bootstrap::IoStatus::Ok) {
      drops_.drop(from.host_string(), from.to_string(), "no complete hello");
      continue;
    }
    int peer = -1, lane = -1;
    if (!check_hello(&h, &peer, &lane) || peer <= me_) {
      drops_.drop(from.host_string(), from.to_string(),
                  "bad hello (wrong job, rank, lane or duplicate)");
      continue;
    }
    bootstrap::set_nodelay(fd.get());
    send_[connection(peer, lane)] = std::move(fd);
    accepted_[connection(peer, lane)] = true;
    --to_accept;
  }
  listener_.reset();  // everything is connected: strays have nothing to reach
  GNIO_INFO(Net, "rank %d: tcp transport connected to %zu remote rank(s), %d socket(s) each", me_,
            peers_.size(), lanes_);
}

TcpMesh::~TcpMesh() = default;

bool TcpMesh::check_hello(const void* hello, int* from, int* lane) const {
  Hello h;
  std::memcpy(&h, hello, sizeof(h));
  if (h.magic != kHelloMagic || h.token != token_ || h.to != me_ || !remote(h.from) ||
      h.lane >= static_cast<std::uint32_t>(lanes_) ||
      accepted_[connection(h.from, static_cast<int>(h.lane))])
    return false;
  *from = h.from;
  *lane = static_cast<int>(h.lane);
  return true;
}

int TcpMesh::send_fd(int peer, int lane, int* err) {
  bootstrap::Fd& slot = send_[connection(peer, lane)];
  if (slot) return slot.get();
  if (connect_ == Connect::AtCreation && peer > me_) {  // that peer connects to this rank
    *err = ENOTCONN;
    return -1;
  }
  const Deadline deadline = Deadline::after(timeout_s_);
  const bootstrap::SockAddr to = bootstrap::SockAddr::from_net(addrs_[peer]);
  bootstrap::Fd fd = bootstrap::connect_tcp(to, deadline, err);
  if (!fd) return -1;
  bootstrap::set_nodelay(fd.get());
  const Hello h{kHelloMagic, me_, peer, static_cast<std::uint32_t>(lane), token_};
  if (bootstrap::send_all(fd.get(), &h, sizeof(h), nullptr, 0, deadline, err) !=
      bootstrap::IoStatus::Ok) {
    if (*err == 0) *err = ETIMEDOUT;
    return -1;
  }
  GNIO_TRACE(Net, "rank %d: tcp transport: connected to rank %d, lane %d", me_, peer, lane);
  slot = std::move(fd);
  if (connect_ == Connect::OnFirstUse) {
    {
      std::lock_guard<std::mutex> lock(opened_mutex_);
      opened_.push_back(Accepted{peer, lane});
      opened_fds_[connection(peer, lane)] = slot.get();
    }
    opened_waker_.notify();
  }
  return slot.get();
}

std::vector<TcpMesh::Accepted> TcpMesh::take_opened() {
  opened_waker_.drain();
  std::lock_guard<std::mutex> lock(opened_mutex_);
  std::vector<Accepted> taken;
  taken.swap(opened_);
  return taken;
}

int TcpMesh::watched_fd(int peer, int lane) const {
  // Written before take_opened() handed (peer, lane) over, under the mutex that ordered it.
  return opened_fds_[connection(peer, lane)];
}

int TcpMesh::receive_fd(int peer, int lane) const {
  const std::size_t c = connection(peer, lane);
  return connect_ == Connect::AtCreation ? send_[c].get() : receive_[c].get();
}

void TcpMesh::add_accept_fds(std::vector<pollfd>& fds) const {
  if (!listener_) return;
  fds.push_back(pollfd{listener_.get(), POLLIN, 0});
  for (const Greeting& g : greeting_) fds.push_back(pollfd{g.fd.get(), POLLIN, 0});
}

std::vector<TcpMesh::Accepted> TcpMesh::accept_ready() {
  std::vector<Accepted> done;
  if (!listener_) return done;
  const auto now = std::chrono::steady_clock::now();
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;  // EAGAIN, or a transient error the next poll retries
    const bootstrap::SockAddr from(reinterpret_cast<sockaddr*>(&ss), len);
    Greeting g;
    g.fd.reset(fd);
    g.until = now + kHelloWait;
    g.peer = from.to_string();
    g.peer_host = from.host_string();
    greeting_.push_back(std::move(g));
  }
  for (Greeting& g : greeting_) {
    while (g.have < sizeof(Hello)) {
      const ssize_t n =
          ::recv(g.fd.get(), reinterpret_cast<char*>(&g.hello) + g.have, sizeof(Hello) - g.have, 0);
      if (n > 0) {
        g.have += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      drops_.drop(g.peer_host, g.peer, "closed before finishing its hello");
      g.fd.reset();
      break;
    }
    if (!g.fd) continue;
    if (g.have < sizeof(Hello)) {
      if (now > g.until) {
        drops_.drop(g.peer_host, g.peer, "sent no complete hello within 5 s");
        g.fd.reset();
      }
      continue;
    }
    int peer = -1, lane = -1;
    if (!check_hello(&g.hello, &peer, &lane)) {
      drops_.drop(g.peer_host, g.peer, "bad hello (wrong job, rank, lane or duplicate)");
      g.fd.reset();
      continue;
    }
    bootstrap::set_nodelay(g.fd.get());
    const std::size_t c = connection(peer, lane);
    accepted_[c] = true;
    receive_[c] = std::move(g.fd);
    done.push_back(Accepted{peer, lane});
  }
  greeting_.erase(
      std::remove_if(greeting_.begin(), greeting_.end(), [](const Greeting& g) { return !g.fd; }),
      greeting_.end());
  return done;
}

}  // namespace gnio::net
