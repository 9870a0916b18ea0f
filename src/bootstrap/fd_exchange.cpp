#include "bootstrap/fd_exchange.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "base/fail.hpp"
#include "bootstrap/scm_rights.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio {
namespace {

using bootstrap::Fd;

sockaddr_un abstract_address(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // sun_path[0] == 0 selects the abstract namespace: no file, gone when the socket closes.
  std::size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// Closes every descriptor in `fds` unless released (on error paths nothing may leak).
struct FdVectorGuard {
  std::vector<int>& fds;
  bool armed = true;
  ~FdVectorGuard() {
    if (!armed) return;
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

}  // namespace

FdExchange::FdExchange(Bootstrap& bootstrap, std::vector<int> node_ranks, std::uint64_t token)
    : bootstrap_(bootstrap),
      node_ranks_(std::move(node_ranks)),
      token_(token),
      timeout_s_(config_seconds("GNIO_BOOTSTRAP_TIMEOUT")) {
  GNIO_REQUIRE(!node_ranks_.empty(), "FdExchange: the list of node ranks is empty");
  for (std::size_t i = 0; i < node_ranks_.size(); ++i) {
    GNIO_REQUIRE(node_ranks_[i] >= 0 && node_ranks_[i] < bootstrap_.size(),
                 "FdExchange: node rank %d is not a rank of the job (0..%d)", node_ranks_[i],
                 bootstrap_.size() - 1);
    GNIO_REQUIRE(i == 0 || node_ranks_[i - 1] < node_ranks_[i],
                 "FdExchange: node ranks must be ascending and distinct (%d follows %d)",
                 node_ranks_[i], node_ranks_[i - 1]);
    if (node_ranks_[i] == bootstrap_.rank()) my_index_ = static_cast<int>(i);
  }
  GNIO_REQUIRE(my_index_ >= 0, "FdExchange: this rank (%d) is not in the list of node ranks",
               bootstrap_.rank());
  peers_.resize(node_ranks_.size());
  if (node_ranks_.size() == 1) return;

  listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener_) fail_errno("FdExchange: socket(AF_UNIX)");
  socklen_t len = 0;
  std::string name = socket_name(bootstrap_.rank());
  sockaddr_un addr = abstract_address(name, &len);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno == EADDRINUSE)
      fail(ErrorClass::SystemError,
           "FdExchange: the socket name @%s is taken: another FdExchange with this job token and "
           "rank %d is alive on this host (two jobs with the same GNIO_JOB_TOKEN?)",
           name.c_str(), bootstrap_.rank());
    fail_errno("FdExchange: bind(@%s)", name.c_str());
  }
  if (::listen(listener_.get(), SOMAXCONN) != 0)
    fail_errno("FdExchange: listen(@%s)", name.c_str());
}

FdExchange::~FdExchange() = default;

std::string FdExchange::socket_name(int world_rank) const {
  return format("gnio-fdx-%016llx-%d", static_cast<unsigned long long>(token_), world_rank);
}

void FdExchange::connect_all(const Deadline& deadline) {
  const int n = static_cast<int>(node_ranks_.size());
  const int me = bootstrap_.rank();
  unsigned char hello[bootstrap::kHelloBytes];
  bootstrap::encode_hello({bootstrap::Purpose::FdExchange, token_, me, bootstrap_.size()}, hello);

  // 1. Connect to every higher position. This completes as soon as the peer's listener exists
  //    (its constructor ran), without the peer accepting, so there is no wait cycle.
  for (int j = my_index_ + 1; j < n; ++j) {
    socklen_t len = 0;
    sockaddr_un addr = abstract_address(socket_name(node_ranks_[j]), &len);
    int backoff_ms = 1;
    for (;;) {
      Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd) fail_errno("FdExchange: socket(AF_UNIX)");
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) {
        if (bootstrap::poll_one(fd.get(), POLLOUT, deadline) <= 0 ||
            ::send(fd.get(), hello, sizeof(hello), MSG_NOSIGNAL) !=
                static_cast<ssize_t>(sizeof(hello)))
          fail(ErrorClass::RemoteError,
               "FdExchange: rank %d could not greet node rank %d (world rank %d): %s", me, j,
               node_ranks_[j], std::strerror(errno));
        peers_[j] = std::move(fd);
        break;
      }
      int err = errno;
      if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR) {
        errno = err;
        fail_errno("FdExchange: rank %d: connect to node rank %d (world rank %d)", me, j,
                   node_ranks_[j]);
      }
      if (deadline.expired())
        fail(ErrorClass::Timeout,
             "FdExchange: rank %d could not reach node rank %d (world rank %d) within %s s: it "
             "has not created its FdExchange. Ranks of one node must run in one network "
             "namespace (abstract Unix sockets); GNIO_BOOTSTRAP_TIMEOUT sets the limit",
             me, j, node_ranks_[j], bootstrap::seconds_text(timeout_s_).c_str());
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms(backoff_ms))));
      backoff_ms = std::min(backoff_ms * 2, 50);
    }
  }

  // 2. Accept every lower position; drop anything else (other users, strangers, another job).
  bootstrap::DropLog drops(format("FdExchange of rank %d", me));
  struct Pending {
    Fd fd;
    Deadline deadline;
  };
  std::vector<Pending> pending;
  double hello_timeout = config_seconds("GNIO_BOOTSTRAP_HELLO_TIMEOUT");
  auto missing = [&] {
    std::vector<int> out;
    for (int j = 0; j < my_index_; ++j)
      if (!peers_[j]) out.push_back(node_ranks_[j]);
    return out;
  };
  while (!missing().empty()) {
    if (deadline.expired())
      fail(ErrorClass::Timeout,
           "FdExchange: rank %d waited %s s for node ranks to connect; world ranks %s never "
           "did (not started, stuck before allgather_fd, or in another network namespace)",
           me, bootstrap::seconds_text(timeout_s_).c_str(),
           bootstrap::format_rank_list(missing()).c_str());
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), deadline.remaining_ms(100));
    if (rc < 0 && errno != EINTR) fail_errno("FdExchange: poll");
    for (std::size_t i = 1; i < fds.size(); ++i) {
      Pending& p = pending[i - 1];
      if (!fds[i].revents) {
        if (p.deadline.expired()) {
          drops.drop("local", "a local process", "sent no hello in time");
          p.fd.reset();
        }
        continue;
      }
      unsigned char buf[bootstrap::kHelloBytes + 1];
      ssize_t got = ::recv(p.fd.get(), buf, sizeof(buf), 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      auto h = got == static_cast<ssize_t>(bootstrap::kHelloBytes)
                   ? bootstrap::decode_hello(buf, bootstrap::kHelloBytes)
                   : std::nullopt;
      const char* why = nullptr;
      int pos = -1;
      if (!h || h->purpose != bootstrap::Purpose::FdExchange)
        why = "not an FdExchange hello";
      else if (h->token != token_)
        why = "a hello with another job's token";
      else {
        auto it = std::lower_bound(node_ranks_.begin(), node_ranks_.end(), h->rank);
        pos = it != node_ranks_.end() && *it == h->rank ? static_cast<int>(it - node_ranks_.begin())
                                                        : -1;
        if (pos < 0 || pos >= my_index_ || peers_[pos]) why = "a hello from an unexpected rank";
      }
      if (why) {
        drops.drop("local", "a local process", why);
        p.fd.reset();
      } else {
        peers_[pos] = std::move(p.fd);
      }
    }
    std::erase_if(pending, [](const Pending& p) { return !p.fd; });
    if (fds[0].revents) {
      for (;;) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          break;
        }
        Fd conn(fd);
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            cred.uid != ::geteuid()) {
          drops.drop("local", format("pid %d uid %u", cred.pid, cred.uid), "another user id");
          continue;
        }
        if (pending.size() >= 256) continue;  // a flood; legit peers retry nothing, but are few
        pending.push_back({std::move(conn), Deadline::after(hello_timeout)});
      }
    }
  }
  listener_.reset();  // every pair is connected; the name is free again
}

std::vector<int> FdExchange::allgather_fd(int my_fd) {
  GNIO_REQUIRE(my_fd >= 0 && ::fcntl(my_fd, F_GETFD) != -1,
               "FdExchange::allgather_fd: %d is not an open file descriptor", my_fd);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty())
    fail(ErrorClass::RemoteError, "FdExchange: unusable after an earlier failure: %s",
         broken_.c_str());
  try {
    return exchange(my_fd);
  } catch (const Error& e) {
    broken_ = e.message();
    throw;
  }
}

std::vector<int> FdExchange::exchange(int my_fd) {
  const int n = static_cast<int>(node_ranks_.size());
  const int me = bootstrap_.rank();
  std::vector<int> result(static_cast<std::size_t>(n), -1);
  FdVectorGuard guard{result};
  result[my_index_] = ::fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
  if (result[my_index_] < 0) fail_errno("FdExchange: dup(%d)", my_fd);
  if (n == 1) {
    guard.armed = false;
    return result;
  }
  Deadline deadline = Deadline::after(timeout_s_);
  if (!connected_) {
    connect_all(deadline);
    connected_ = true;
  }
  const std::uint32_t seq = ++seq_;

  // Send first: each message is small and the socket buffer holds it, so no rank waits on a
  // peer's receive here; then receive one descriptor from every peer, in arrival order.
  unsigned char head[bootstrap::kFdMessageBytes];
  bootstrap::encode_fd_message({seq, me}, head);
  for (int j = 0; j < n; ++j) {
    if (j == my_index_) continue;
    const bootstrap::ScmRightsMessage msg(head, sizeof(head), my_fd);
    for (;;) {
      if (::sendmsg(peers_[j].get(), msg.header(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(sizeof(head)))
        break;
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        int rev = bootstrap::poll_one(peers_[j].get(), POLLOUT, deadline);
        if (rev > 0) continue;
        if (rev == 0)
          fail(ErrorClass::Timeout,
               "FdExchange: rank %d could not send a descriptor to world rank %d within %s s (it "
               "is not receiving)",
               me, node_ranks_[j], bootstrap::seconds_text(timeout_s_).c_str());
      }
      fail(ErrorClass::RemoteError,
           "FdExchange: rank %d: the connection to node rank %d (world rank %d) broke during "
           "allgather_fd #%u (%s): it exited or crashed",
           me, j, node_ranks_[j], seq, std::strerror(errno));
    }
  }

  int left = n - 1;
  while (left > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int j = 0; j < n; ++j)
      if (j != my_index_ && result[j] < 0) {
        fds.push_back({peers_[j].get(), POLLIN, 0});
        which.push_back(j);
      }
    int rc = ::poll(fds.data(), fds.size(), deadline.remaining_ms(1000));
    if (rc < 0 && errno != EINTR) fail_errno("FdExchange: poll");
    if (rc <= 0) {
      if (!deadline.expired()) continue;
      std::vector<int> missing;
      for (int j : which) missing.push_back(node_ranks_[j]);
      fail(ErrorClass::Timeout,
           "FdExchange: rank %d timed out after %s s in allgather_fd #%u waiting for world ranks "
           "%s; every rank of the node must call allgather_fd the same number of times",
           me, bootstrap::seconds_text(timeout_s_).c_str(), seq,
           bootstrap::format_rank_list(missing).c_str());
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int j = which[i];
      unsigned char buf[bootstrap::kFdMessageBytes + 1];
      iovec iov{buf, sizeof(buf)};
      alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t got = ::recvmsg(peers_[j].get(), &msg, MSG_CMSG_CLOEXEC);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      std::vector<int> received;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); got > 0 && c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (std::size_t k = 0; k < count; ++k) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
            received.push_back(fd);
          }
        }
      if (got <= 0) {
        close_all(received);
        fail(ErrorClass::RemoteError,
             "FdExchange: rank %d: node rank %d (world rank %d) closed its connection during "
             "allgather_fd #%u (%s): it exited, crashed, or destroyed its FdExchange",
             me, j, node_ranks_[j], seq, got == 0 ? "closed" : std::strerror(errno));
      }
      auto m = bootstrap::decode_fd_message(buf, static_cast<std::size_t>(got));
      if (!m || m->seq != seq || m->src != node_ranks_[j] || received.size() != 1 ||
          (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
        close_all(received);
        fail(ErrorClass::RemoteError,
             "FdExchange: rank %d: world rank %d sent %s in allgather_fd #%u (got call #%u with "
             "%zu descriptors); the node's ranks are out of step",
             me, node_ranks_[j], m ? "an unexpected message" : "a malformed message", seq,
             m ? m->seq : 0u, received.size());
      }
      result[j] = received[0];
      --left;
    }
  }
  guard.armed = false;
  return result;
}

}  // namespace gnio
