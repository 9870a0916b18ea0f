#include "bootstrap/liveness.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/fail.hpp"
#include "base/thread_name.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

// One message on a liveness connection: magic | u16 type | u16 0 | i32 rank | u32 cause.
constexpr std::size_t kMsgBytes = 16;
enum class MsgType : std::uint16_t { Heartbeat = 1, Goodbye = 2, Lost = 3 };
// What the watching end saw; carried in Lost so every survivor can say what happened.
enum class Cause : std::uint32_t {
  Closed = 1,
  Reset = 2,
  Silent = 3,
  NeverConnected = 4,
  Protocol = 5
};
// How long an orderly goodbye waits for the other end to close in turn. Bounded because the other
// end may die at that moment; it is not a failure when it passes.
constexpr double kGoodbyeWait_s = 1.0;

void put(unsigned char* p, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint32_t{p[i]} << (8 * i);
  return v;
}

std::string encode(MsgType type, int rank = 0, Cause cause = Cause::Closed) {
  unsigned char m[kMsgBytes] = {};
  put(m, kLivenessMagic, 4);
  put(m + 4, static_cast<std::uint32_t>(type), 2);
  put(m + 8, static_cast<std::uint32_t>(rank), 4);
  put(m + 12, static_cast<std::uint32_t>(cause), 4);
  return std::string(reinterpret_cast<const char*>(m), kMsgBytes);
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One watched connection: to this rank's parent or to one of its children.
struct Link {
  Fd fd;
  bool connected = false;  // the connection is up (a child said hello)
  bool done = false;       // goodbye, loss or close seen: nothing more to watch
  unsigned char in[kMsgBytes] = {};
  std::size_t have = 0;
  std::string out;  // bytes not yet written (the socket is non-blocking)
  Clock::time_point last_heard{};
};

// A connection to this rank's listener that has not finished its hello yet.
struct Pending {
  Fd fd;
  unsigned char hello[kHelloBytes] = {};
  std::size_t have = 0;
  Clock::time_point deadline{};
  std::string peer, peer_host;
};

// Writes what `link.out` holds as far as the socket takes it. False when the connection broke.
bool flush(Link& link, int* err) {
  while (!link.out.empty()) {
    ssize_t n =
        ::send(link.fd.get(), link.out.data(), link.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) {
      *err = errno;
      return false;
    }
    link.out.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

LivenessWatcher::LivenessWatcher(Bootstrap& bootstrap, const LivenessOptions& options,
                                 PeerLossHandler on_loss)
    : rank_(bootstrap.rank()),
      size_(bootstrap.size()),
      token_(bootstrap.token()),
      options_(options),
      on_loss_(std::move(on_loss)),
      cards_(static_cast<std::size_t>(bootstrap.size())) {
  if (size_ == 1) return;
  GNIO_REQUIRE(options_.fanout >= 1 && options_.fanout <= 255,
               "liveness: the fan-out %d is not in [1, 255] (GNIO_LIVENESS_FANOUT)",
               options_.fanout);
  Card& mine = cards_[rank_];
  std::memset(&mine, 0, sizeof(mine));
  mine.pid = static_cast<std::uint32_t>(::getpid());
  mine.fanout = static_cast<std::uint8_t>(options_.fanout);
  std::strncpy(mine.host, host_name().c_str(), sizeof(mine.host) - 1);
  if (has_children(rank_)) {
    // The listener is where this rank's bootstrap listens: an address the others already reach.
    auto* tcp = dynamic_cast<TcpBootstrap*>(&bootstrap);
    SockAddr bind_addr = tcp ? tcp->listen_address() : choose_root_address();
    bind_addr.set_port(0);
    listener_ = listen_tcp(bind_addr, format("liveness listener of rank %d", rank_).c_str());
    NetAddress a = local_address(listener_.get()).to_net();
    mine.family = a.family;
    mine.port = a.port;
    mine.scope_id = a.scope_id;
    std::memcpy(mine.addr, a.bytes.data(), sizeof(mine.addr));
  }
  bootstrap.allgather(cards_.data(), sizeof(Card));
  for (Card& c : cards_) c.host[sizeof(c.host) - 1] = '\0';
  // Every rank must draw the same tree, or children knock at the wrong parents.
  for (int r = 0; r < size_; ++r)
    if (cards_[r].fanout != mine.fanout)
      fail(ErrorClass::InvalidArgument,
           "liveness: rank %d has GNIO_LIVENESS_FANOUT=%d but %s has %d; set the same value on "
           "every rank",
           rank_, options_.fanout, describe(r).c_str(), cards_[r].fanout);
  if (rank_ != 0) {
    const int parent = parent_of(rank_);
    const Card& up = cards_[parent];
    if ((up.family != 4 && up.family != 6) || up.port == 0)
      fail(ErrorClass::RemoteError, "liveness: rank %d got an invalid listening address from %s",
           rank_, describe(parent).c_str());
    NetAddress a;
    a.family = up.family;
    a.port = up.port;
    a.scope_id = up.scope_id;
    std::memcpy(a.bytes.data(), up.addr, sizeof(up.addr));
    SockAddr to = SockAddr::from_net(a);
    Deadline deadline = Deadline::after(options_.connect_s);
    int err = 0;
    Fd fd = connect_tcp(to, deadline, &err);
    if (!fd)
      fail(err == ETIMEDOUT ? ErrorClass::Timeout : ErrorClass::RemoteError,
           "liveness: rank %d could not connect to %s at %s (%s); check that this host can "
           "reach it (firewall, GNIO_SOCKET_IFNAME), or set GNIO_HEARTBEAT_INTERVAL=0 to run "
           "without failure detection",
           rank_, describe(parent).c_str(), to.to_string().c_str(), std::strerror(err));
    set_nodelay(fd.get());
    unsigned char hello[kHelloBytes];
    encode_hello({Purpose::Liveness, token_, rank_, size_}, hello);
    if (send_all(fd.get(), hello, sizeof(hello), nullptr, 0, deadline, &err) != IoStatus::Ok)
      fail(ErrorClass::RemoteError, "liveness: rank %d could not greet %s at %s (%s)", rank_,
           describe(parent).c_str(), to.to_string().c_str(), std::strerror(err));
    parent_ = std::move(fd);
  }
  thread_ = std::thread([this] {
    name_this_thread("gnio-liveness");
    run();
  });
}

LivenessWatcher::~LivenessWatcher() {
  stop_.store(true, std::memory_order_release);
  waker_.notify();
  if (thread_.joinable()) thread_.join();
}

std::string LivenessWatcher::describe(int rank) const {
  if (rank < 0 || rank >= size_ || cards_[rank].pid == 0) return format("rank %d", rank);
  return format("rank %d (%s pid %u)", rank, cards_[rank].host, cards_[rank].pid);
}

void LivenessWatcher::run() noexcept {
  std::vector<Link> links(static_cast<std::size_t>(size_));
  std::vector<Pending> pending;
  std::vector<bool> reported(static_cast<std::size_t>(size_), false);
  DropLog drops(format("rank %d's liveness listener", rank_));
  const Clock::time_point started = Clock::now();
  const Clock::time_point connect_deadline = started + seconds(options_.connect_s);
  const Clock::duration interval = seconds(options_.interval_s);
  const Clock::duration silence = seconds(options_.silence_s);
  // This rank's neighbours in the tree: the parent (connected already) and the children (who
  // connect to this rank's listener).
  std::vector<int> children;
  for (long long c = first_child_of(rank_);
       c < size_ && c < first_child_of(rank_) + options_.fanout; ++c)
    children.push_back(static_cast<int>(c));
  const int parent = parent_of(rank_);
  if (parent >= 0) {
    Link& up = links[parent];
    up.connected = true;
    up.fd = std::move(parent_);
    up.last_heard = started;
  }
  // Every loop below visits these links only: at most fan-out + 1, whatever the job's size.
  std::vector<int> neighbours = children;
  if (parent >= 0) neighbours.push_back(parent);

  auto cause_text = [&](Cause cause, int err) -> std::string {
    switch (cause) {
      case Cause::Closed:
        return "its connection closed without a goodbye: the process was killed, crashed or "
               "exited without destroying its Comm";
      case Cause::Reset:
        return err ? format("its connection broke (%s): the process died or its host is gone",
                            std::strerror(err))
                   : "its connection broke: the process died or its host is gone";
      case Cause::Silent:
        return format(
            "nothing was heard from it for %s s (heartbeats every %s s): its host is "
            "down, the network is cut, or the process is stopped",
            seconds_text(options_.silence_s).c_str(), seconds_text(options_.interval_s).c_str());
      case Cause::NeverConnected:
        return format("it never opened its liveness connection within %s s of creation",
                      seconds_text(options_.connect_s).c_str());
      case Cause::Protocol: return "its liveness connection broke the protocol";
    }
    return "it was lost";
  };
  // Reports `r` (once) to the handler and passes the news to every neighbour but the one it
  // came from (`via`, -1 when this rank saw it): the tree has no cycles, so each rank hears it
  // once.
  auto report = [&](int r, Cause cause, int err, int via) {
    if (r < 0 || r >= size_ || r == rank_ || reported[r]) return;
    reported[r] = true;
    std::string what = format(
        "%s died or became unreachable: %s%s", describe(r).c_str(), cause_text(cause, err).c_str(),
        via >= 0
            ? format(" (told by %s, along the ranks' liveness tree)", describe(via).c_str()).c_str()
            : "");
    if (on_loss_) on_loss_(r, what);
    for (int o : neighbours)
      if (o != r && o != via && links[o].connected && !links[o].done)
        links[o].out += encode(MsgType::Lost, r, cause);
  };
  auto lose = [&](int r, Cause cause, int err) {
    Link& l = links[r];
    l.done = true;
    l.fd.reset();
    report(r, cause, err, -1);
  };
  auto on_message = [&](int r, const unsigned char* m) {
    if (get(m, 4) != kLivenessMagic || get(m + 6, 2) != 0) return lose(r, Cause::Protocol, 0);
    switch (static_cast<MsgType>(get(m + 4, 2))) {
      case MsgType::Heartbeat: return;
      case MsgType::Goodbye:
        // The other end shut its writing side after this; closing ours completes the exchange.
        links[r].done = true;
        links[r].fd.reset();
        GNIO_TRACE(Bootstrap, "liveness: %s said goodbye", describe(r).c_str());
        return;
      case MsgType::Lost: {
        auto cause = static_cast<Cause>(get(m + 12, 4));
        return report(static_cast<int>(get(m + 8, 4)), cause, 0, r);
      }
    }
    lose(r, Cause::Protocol, 0);
  };
  auto read_link = [&](int r) {
    Link& l = links[r];
    while (!l.done) {
      ssize_t n = ::recv(l.fd.get(), l.in + l.have, kMsgBytes - l.have, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0) return lose(r, Cause::Closed, 0);
      if (n < 0) return lose(r, Cause::Reset, errno);
      l.last_heard = Clock::now();
      l.have += static_cast<std::size_t>(n);
      if (l.have == kMsgBytes) {
        l.have = 0;
        on_message(r, l.in);
      }
    }
  };
  auto read_hello = [&](Pending& p) {
    ssize_t n = ::recv(p.fd.get(), p.hello + p.have, kHelloBytes - p.have, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      drops.drop(p.peer_host, p.peer, "closed before finishing its hello");
      p.fd.reset();
      return;
    }
    p.have += static_cast<std::size_t>(n);
    if (p.have < kHelloBytes) return;
    auto h = decode_hello(p.hello, kHelloBytes);
    const char* why = nullptr;
    if (!h || h->purpose != Purpose::Liveness)
      why = "not a gnio liveness hello";
    else if (h->token != token_)
      why = "a liveness hello with another job's token";
    else if (h->size != size_ || h->rank <= 0 || h->rank >= size_ || parent_of(h->rank) != rank_)
      why = "a liveness hello from a rank that is not this rank's child";
    else if (links[h->rank].connected || links[h->rank].done)
      why = "a second liveness connection for one rank";
    if (why) {
      drops.drop(p.peer_host, p.peer, why);
      p.fd.reset();
      return;
    }
    Link& l = links[h->rank];
    l.fd = std::move(p.fd);
    l.connected = true;
    l.last_heard = Clock::now();
  };
  auto accept_all = [&] {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error the next poll retries
      set_nodelay(fd);
      Pending p;
      p.fd.reset(fd);
      SockAddr peer(reinterpret_cast<sockaddr*>(&ss), len);
      p.peer = peer.to_string();
      p.peer_host = peer.host_string();
      p.deadline = Clock::now() + seconds(5);
      pending.push_back(std::move(p));
    }
  };

  std::vector<pollfd> fds;
  std::vector<int> who;  // rank of each polled link, -1 for a pending hello, -2 waker/listener
  Clock::time_point next_beat = started;
  try {
    while (!stop_.load(std::memory_order_acquire)) {
      Clock::time_point now = Clock::now();
      if (now >= next_beat) {
        for (int r : neighbours) {
          Link& l = links[r];
          if (l.connected && !l.done && l.out.empty()) l.out += encode(MsgType::Heartbeat);
        }
        next_beat = now + interval;
      }
      Clock::time_point wake = next_beat;
      for (int r : neighbours) {
        Link& l = links[r];
        if (l.done) continue;
        if (l.connected && now - l.last_heard > silence)
          lose(r, Cause::Silent, 0);
        else if (!l.connected && now > connect_deadline)
          lose(r, Cause::NeverConnected, 0);
        else
          wake = std::min(wake, l.connected ? l.last_heard + silence : connect_deadline);
      }
      for (Pending& p : pending)
        if (p.fd && now > p.deadline) {
          drops.drop(p.peer_host, p.peer, "sent no complete hello within 5 s");
          p.fd.reset();
        }
      pending.erase(
          std::remove_if(pending.begin(), pending.end(), [](const Pending& p) { return !p.fd; }),
          pending.end());
      for (int r : neighbours) {
        Link& l = links[r];
        int err = 0;
        if (l.connected && !l.done && !flush(l, &err)) lose(r, Cause::Reset, err);
      }

      fds.clear();
      who.clear();
      fds.push_back({waker_.fd(), POLLIN, 0});
      who.push_back(-2);
      const bool listening = static_cast<bool>(listener_);
      if (listening) {
        fds.push_back({listener_.get(), POLLIN, 0});
        who.push_back(-2);
      }
      for (Pending& p : pending) {
        fds.push_back({p.fd.get(), POLLIN, 0});
        who.push_back(-1);
      }
      for (int r : neighbours) {
        Link& l = links[r];
        if (!l.connected || l.done) continue;
        fds.push_back({l.fd.get(), static_cast<short>(POLLIN | (l.out.empty() ? 0 : POLLOUT)), 0});
        who.push_back(r);
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
      int rc =
          ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(ms + 1, 1, 60000)));
      if (rc < 0 && errno != EINTR) fail_errno("liveness: rank %d: poll", rank_);
      if (rc <= 0) continue;
      if (fds[0].revents) waker_.drain();
      std::size_t first = listening ? 2 : 1, pi = 0;
      for (std::size_t i = first; i < fds.size(); ++i) {
        if (!fds[i].revents) {
          if (who[i] == -1) ++pi;
          continue;
        }
        if (who[i] == -1) {
          read_hello(pending[pi++]);
        } else {
          int r = who[i], err = 0;
          if ((fds[i].revents & POLLOUT) && !flush(links[r], &err)) lose(r, Cause::Reset, err);
          if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_link(r);
        }
      }
      if (listening && fds[1].revents) accept_all();
      if (listening) {
        // Once every child is in, strays have nothing to connect to.
        bool all_in = true;
        for (int c : children) all_in = all_in && (links[c].connected || links[c].done);
        if (all_in) {
          listener_.reset();
          pending.clear();
        }
      }
    }
  } catch (const std::exception& e) {
    GNIO_WARN(Bootstrap,
              "liveness: rank %d: the watcher stopped (%s); peer failures are no longer "
              "detected, device waits still end at GNIO_TIMEOUT",
              rank_, e.what());
  }

  // Orderly goodbye: tell every live end, close our writing side, and wait (bounded) for each
  // end to close in turn, so no byte is left unread when the sockets close (an unread byte makes
  // the kernel send a reset, which the other end could not tell from a crash).
  const Clock::time_point until = Clock::now() + seconds(kGoodbyeWait_s);
  for (int r : neighbours)
    if (links[r].connected && !links[r].done) links[r].out += encode(MsgType::Goodbye);
  for (;;) {
    fds.clear();
    who.clear();
    for (int r : neighbours) {
      Link& l = links[r];
      if (!l.connected || l.done) continue;
      int err = 0;
      bool was_pending = !l.out.empty();
      if (!flush(l, &err)) {
        l.done = true;
        continue;
      }
      if (was_pending && l.out.empty()) ::shutdown(l.fd.get(), SHUT_WR);
      fds.push_back({l.fd.get(), static_cast<short>(POLLIN | (l.out.empty() ? 0 : POLLOUT)), 0});
      who.push_back(r);
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (fds.empty() || ms <= 0) break;
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(ms));
    if (rc < 0 && errno != EINTR) break;
    for (std::size_t i = 0; rc > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Link& l = links[who[i]];
      unsigned char sink[256];
      ssize_t n = ::recv(l.fd.get(), sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        l.done = true;
    }
  }
}

}  // namespace gnio::bootstrap
