// TcpBootstrap's progress thread: accepts connections, authenticates their hellos and reads
// frames into the queues that take() serves.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap_shared.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxHandshaking = 256;
// Bytes the progress thread reads from one connection before looking at the others.
constexpr std::size_t kReadBudget = 4u << 20;

struct Incoming {
  Fd fd;
  std::string peer, peer_host;
  StreamParser parser;
  Clock::time_point hello_deadline;
  int rank = -1;  // >= 0 once the hello is accepted
  bool dead = false;
  explicit Incoming(std::uint64_t max_msg) : parser(true, max_msg) {}
};

}  // namespace

void TcpBootstrap::progress_loop() noexcept {
  std::vector<std::unique_ptr<Incoming>> conns;
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until{};
  auto hello_window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(hello_timeout_s_ > 0 ? hello_timeout_s_ : 1e9));

  auto drop = [&](Incoming& c, const std::string& why) {
    drops_.drop(c.peer_host, c.peer, why.c_str());
    c.dead = true;
  };
  auto peer_closed = [&](Incoming& c, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Inbound& in = in_[c.rank];
      if (!in.closed) {
        in.closed = true;
        in.close_reason = why;
      }
    }
    arrived_.notify_all();
    c.dead = true;
  };
  auto on_hello = [&](Incoming& c) {
    const Hello& h = c.parser.hello();
    if (h.purpose != Purpose::Peer) return drop(c, "a gnio connection with the wrong purpose");
    if (h.token != token_)
      return drop(c, "a gnio hello with another job's token (another job, or a stale rank)");
    if (h.size != size_ || h.rank == rank_)
      return drop(c, format("a hello claiming rank %d of %d, which cannot be a peer of rank %d "
                            "of %d",
                            h.rank, h.size, rank_, size_));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Inbound& in = in_[h.rank];
      if (in.connected)
        return drop(c, format("a second connection claiming to be rank %d (rank %d is already "
                              "connected%s)",
                              h.rank, h.rank, in.closed ? " and closed" : ""));
      in.connected = true;
    }
    c.rank = h.rank;
    arrived_.notify_all();
  };
  auto on_frame = [&](Incoming& c) {
    const FrameHeader& f = c.parser.header();
    if (f.src != c.rank)
      return peer_closed(
          c, format("it sent a frame claiming to come from rank %d (protocol error)", f.src));
    if (f.type == FrameType::Abort) {
      std::vector<unsigned char> p = c.parser.take_payload();
      auto e = decode_error_payload(p.data(), p.size(), kErrorClassCount);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (poisoned_.empty()) {
          poisoned_ =
              format("bootstrap: rank %d: %s aborted the job: %s", rank_, describe(c.rank).c_str(),
                     e ? e->message.c_str() : "(malformed abort message)");
          poison_class_ = ErrorClass::RemoteError;
        }
      }
      arrived_.notify_all();
      return;
    }
    if (f.type != FrameType::Data && f.type != FrameType::Coll)
      return peer_closed(c, format("it sent an unexpected frame of type %u (protocol error)",
                                   static_cast<unsigned>(f.type)));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_[c.rank].queues[{static_cast<std::uint16_t>(f.type), f.tag}].push_back(
          {f.flags, c.parser.take_payload()});
    }
    arrived_.notify_all();
  };
  auto read_some = [&](Incoming& c) {
    std::size_t budget = kReadBudget;
    while (!c.dead && budget > 0) {
      std::span<unsigned char> buf = c.parser.next_buffer();
      std::size_t want = std::min(buf.size(), budget);
      ssize_t n = ::recv(c.fd.get(), buf.data(), want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        std::string how = n == 0 ? "closed" : format("lost (%s)", std::strerror(errno));
        if (c.rank < 0)
          drop(c, c.parser.bytes_seen() == 0
                      ? format("connected and %s without sending anything (a port scan?)",
                               n == 0 ? "closed" : "failed")
                      : format("%s after %llu bytes of an incomplete hello", how.c_str(),
                               static_cast<unsigned long long>(c.parser.bytes_seen())));
        else
          peer_closed(c,
                      c.parser.mid_message()
                          ? format("its connection was %s in the middle of a message", how.c_str())
                          : format("its connection was %s (it exited, crashed or destroyed "
                                   "its Bootstrap)",
                                   how.c_str()));
        return;
      }
      budget -= static_cast<std::size_t>(n);
      switch (c.parser.commit(static_cast<std::size_t>(n))) {
        case StreamParser::Event::NeedMore: break;
        case StreamParser::Event::Hello: on_hello(c); break;
        case StreamParser::Event::Frame: on_frame(c); break;
        case StreamParser::Event::Error:
          if (c.rank < 0)
            drop(c, c.parser.error());
          else {
            GNIO_WARN(Bootstrap, "rank %d: %s broke the protocol: %s", rank_,
                      describe(c.rank).c_str(), c.parser.error());
            peer_closed(c, format("it broke the protocol (%s; GNIO_BOOTSTRAP_MAX_MSG=%llu here)",
                                  c.parser.error(), static_cast<unsigned long long>(max_msg_)));
          }
          return;
      }
    }
  };
  auto accept_all = [&]() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        GNIO_WARN(Bootstrap, "rank %d: accept failed (%s); pausing accepts for 100 ms", rank_,
                  std::strerror(errno));
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        return;
      }
      set_nodelay(fd);
      auto c = std::make_unique<Incoming>(max_msg_);
      c->fd.reset(fd);
      SockAddr peer(reinterpret_cast<sockaddr*>(&ss), len);
      c->peer = peer.to_string();
      c->peer_host = peer.host_string();
      c->hello_deadline = Clock::now() + hello_window;
      std::size_t handshaking = 0;
      for (const auto& o : conns)
        if (o->rank < 0 && !o->dead) ++handshaking;
      if (handshaking >= kMaxHandshaking)
        for (auto& o : conns)
          if (o->rank < 0 && !o->dead) {
            drop(*o, "too many unfinished handshakes at once; dropped the oldest");
            break;
          }
      conns.push_back(std::move(c));
    }
  };

  try {
    while (!stop_.load(std::memory_order_acquire)) {
      Clock::time_point now = Clock::now(), next = now + std::chrono::seconds(1);
      for (auto& c : conns) {
        if (c->dead || c->rank >= 0) continue;
        if (now >= c->hello_deadline)
          drop(*c, c->parser.bytes_seen() == 0
                       ? format("sent nothing within %s s of connecting "
                                "(GNIO_BOOTSTRAP_HELLO_TIMEOUT)",
                                seconds_text(hello_timeout_s_).c_str())
                       : format("stalled after %llu bytes of its hello for %s s (a slow or "
                                "stuck client; GNIO_BOOTSTRAP_HELLO_TIMEOUT)",
                                static_cast<unsigned long long>(c->parser.bytes_seen()),
                                seconds_text(hello_timeout_s_).c_str()));
        else
          next = std::min(next, c->hello_deadline);
      }
      conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->dead; }),
                  conns.end());

      fds.clear();
      fds.push_back({waker_.fd(), POLLIN, 0});
      bool accepting = now >= accept_paused_until;
      if (accepting)
        fds.push_back({listener_.get(), POLLIN, 0});
      else
        next = std::min(next, accept_paused_until);
      std::size_t first_conn = fds.size();
      for (auto& c : conns) fds.push_back({c->fd.get(), POLLIN, 0});
      int timeout_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1);
      int rc = ::poll(fds.data(), fds.size(), std::max(timeout_ms, 0));
      if (rc < 0) {
        if (errno == EINTR) continue;
        fail_errno("bootstrap: rank %d: poll in the progress thread", rank_);
      }
      if (fds[0].revents) waker_.drain();
      // Connections first (their indices are stable), then new ones.
      std::size_t n_conns = conns.size();
      for (std::size_t i = 0; i < n_conns; ++i)
        if (fds[first_conn + i].revents) read_some(*conns[i]);
      if (accepting && fds[1].revents) accept_all();
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (poisoned_.empty()) {
      poisoned_ = format("bootstrap: rank %d: the progress thread failed: %s", rank_, e.what());
      poison_class_ = ErrorClass::SystemError;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (poisoned_.empty()) {
      poisoned_ = format("bootstrap: rank %d: the progress thread failed", rank_);
      poison_class_ = ErrorClass::Internal;
    }
  }
  arrived_.notify_all();
}

}  // namespace gnio::bootstrap
