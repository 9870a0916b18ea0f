#include "bootstrap/tcp_bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "base/fail.hpp"
#include "base/thread_name.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/local_rendezvous.hpp"
#include "bootstrap/pmix_rendezvous.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio {
namespace bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxHandshaking = 256;
// Bytes the progress thread reads from one connection before looking at the others.
constexpr std::size_t kReadBudget = 4u << 20;
constexpr std::uint32_t kErrorClassCount = static_cast<std::uint32_t>(ErrorClass::Internal) + 1;

const char* coll_name(std::uint16_t kind) {
  switch (static_cast<CollKind>(kind)) {
    case CollKind::Allgather: return "allgather";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Barrier: return "barrier";
  }
  return "an unknown collective";
}

std::uint32_t clamp_ms(int ms) {
  return static_cast<std::uint32_t>(std::max(ms, 1));
}

// Sleeps for `ms` but not past the deadline.
void nap(int ms, const Deadline& deadline) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, deadline.remaining_ms(ms))));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and rendezvous

TcpBootstrap::TcpBootstrap(std::uint64_t token, int rank, int size,
                           std::unique_ptr<RootService> own_root)
    : rank_(rank),
      size_(size),
      token_(token),
      timeout_s_(config_seconds("GNIO_BOOTSTRAP_TIMEOUT")),
      max_msg_(config_size("GNIO_BOOTSTRAP_MAX_MSG")),
      hello_timeout_s_(config_seconds("GNIO_BOOTSTRAP_HELLO_TIMEOUT")),
      own_root_(std::move(own_root)),
      in_(static_cast<std::size_t>(size)),
      drops_(format("rank %d's listener", rank)) {
  out_.reserve(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) out_.push_back(std::make_unique<Outbound>());
}

std::unique_ptr<TcpBootstrap> TcpBootstrap::join(const SockAddr& root, std::uint64_t token,
                                                 int rank, int size,
                                                 std::unique_ptr<RootService> own_root) {
  std::unique_ptr<TcpBootstrap> b(new TcpBootstrap(token, rank, size, std::move(own_root)));
  b->start(root);  // on failure the destructor stops the progress thread and any own root
  return b;
}

void TcpBootstrap::start(const SockAddr& root) {
  Deadline deadline = Deadline::after(timeout_s_);
  root_addr_ = root;
  SockAddr bind_addr = choose_rank_address(root);
  bind_addr.set_port(0);
  listener_ = listen_tcp(bind_addr, format("bootstrap listener of rank %d", rank_).c_str());
  listen_addr_ = local_address(listener_.get());
  GNIO_INFO(Bootstrap, "rank %d of %d listens on %s, joining the root %s", rank_, size_,
            listen_addr_.to_string().c_str(), root.to_string().c_str());
  rendezvous(root, deadline);
  // Only now: the progress thread reads peers_, which is fixed from here on. Connections that
  // arrive earlier (a faster peer, a stray client) wait in the listener's backlog meanwhile.
  in_[rank_].connected = true;  // messages to self are queued directly
  progress_ = std::thread([this] {
    name_this_thread("gnio-bootstrap");
    progress_loop();
  });
}

void TcpBootstrap::rendezvous(const SockAddr& root, const Deadline& deadline) {
  auto started = Clock::now();
  // The root may not be up yet (launchers start ranks in any order): retry until the deadline.
  Fd fd;
  int err = 0, backoff_ms = 10;
  for (;;) {
    fd = connect_tcp(root, deadline, &err);
    if (fd || deadline.expired()) break;
    nap(backoff_ms, deadline);
    backoff_ms = std::min(backoff_ms * 2, 500);
  }
  if (!fd)
    fail(ErrorClass::Timeout,
         "bootstrap: rank %d of %d could not reach the root %s within %s s (last error: %s). "
         "Check that the process that created the unique id (rank 0 for launcher variables) is "
         "running and that this host can reach %s (firewall, MASTER_ADDR, GNIO_SOCKET_IFNAME)",
         rank_, size_, root.to_string().c_str(), seconds_text(timeout_s_).c_str(),
         std::strerror(err), root.host_string().c_str());

  unsigned char hello[kHelloBytes];
  encode_hello({Purpose::Register, token_, rank_, size_}, hello);
  RankRecord me;
  me.listen = listen_addr_.to_net();
  me.pid = static_cast<std::uint32_t>(::getpid());
  me.wait_ms = deadline.infinite() ? 0 : clamp_ms(deadline.remaining_ms());
  me.timeout_ms = static_cast<std::uint32_t>(std::min(
      timeout_s_ * 1000.0, static_cast<double>(std::numeric_limits<std::uint32_t>::max())));
  me.host = host_name();
  unsigned char frame[kHelloBytes + kFrameHeaderBytes + kRankRecordBytes];
  std::memcpy(frame, hello, kHelloBytes);
  encode_frame_header({FrameType::Register, 0, rank_, 0, kRankRecordBytes}, frame + kHelloBytes);
  encode_rank_record(me, frame + kHelloBytes + kFrameHeaderBytes);
  IoStatus st = send_all(fd.get(), frame, sizeof(frame), nullptr, 0, deadline, &err);
  if (st != IoStatus::Ok)
    fail(ErrorClass::RemoteError,
         "bootstrap: rank %d could not register with the root %s: %s (did the root process "
         "exit?)",
         rank_, root.to_string().c_str(),
         st == IoStatus::Timeout ? "timed out" : std::strerror(err));

  // The reply: the address table, or an Error frame (someone never arrived, a conflict).
  std::uint64_t table_bytes = static_cast<std::uint64_t>(size_) * kRankRecordBytes;
  unsigned char head[kFrameHeaderBytes];
  st = recv_all(fd.get(), head, sizeof(head), deadline, &err);
  if (st == IoStatus::Timeout)
    fail(ErrorClass::Timeout,
         "bootstrap: rank %d of %d registered with the root %s but got no address table within "
         "%s s, and the root did not report which ranks are missing (did the root process exit "
         "or hang?)",
         rank_, size_, root.to_string().c_str(), seconds_text(timeout_s_).c_str());
  if (st != IoStatus::Ok)
    fail(ErrorClass::RemoteError,
         "bootstrap: the root %s closed the connection of rank %d before sending the address "
         "table (%s); the root process exited or dropped this rank",
         root.to_string().c_str(), rank_, st == IoStatus::Closed ? "closed" : std::strerror(err));
  auto header = decode_frame_header(head, sizeof(head),
                                    std::max<std::uint64_t>(table_bytes, kMaxErrorPayload));
  if (!header || (header->type != FrameType::Table && header->type != FrameType::Error))
    fail(ErrorClass::RemoteError,
         "bootstrap: rank %d: what answers at the root address %s is not a gnio bootstrap root "
         "(wrong MASTER_ADDR/port?)",
         rank_, root.to_string().c_str());
  std::vector<unsigned char> payload(static_cast<std::size_t>(header->length));
  st = recv_all(fd.get(), payload.data(), payload.size(), deadline, &err);
  if (st != IoStatus::Ok)
    fail(st == IoStatus::Timeout ? ErrorClass::Timeout : ErrorClass::RemoteError,
         "bootstrap: rank %d: the root %s stopped in the middle of its reply", rank_,
         root.to_string().c_str());
  if (header->type == FrameType::Error) {
    auto e = decode_error_payload(payload.data(), payload.size(), kErrorClassCount);
    if (!e)
      fail(ErrorClass::RemoteError, "bootstrap: rank %d: the root %s sent a malformed error", rank_,
           root.to_string().c_str());
    fail(static_cast<ErrorClass>(e->error_class), "%s (rank %d of %d)", e->message.c_str(), rank_,
         size_);
  }
  auto table = decode_table(payload.data(), payload.size(), size_);
  if (!table || !((*table)[rank_].listen == me.listen))
    fail(ErrorClass::RemoteError, "bootstrap: rank %d: the root %s sent an invalid address table",
         rank_, root.to_string().c_str());
  peers_ = std::move(*table);
  GNIO_INFO(Bootstrap, "rank %d of %d joined in %.3f s", rank_, size_,
            std::chrono::duration<double>(Clock::now() - started).count());
}

TcpBootstrap::~TcpBootstrap() {
  stop_.store(true, std::memory_order_release);
  waker_.notify();
  if (progress_.joinable()) progress_.join();
  if (own_root_) own_root_->stop();
}

std::string TcpBootstrap::describe(int rank) const {
  if (static_cast<std::size_t>(rank) >= peers_.size()) return format("rank %d", rank);
  const RankRecord& r = peers_[rank];
  return format("rank %d (%s pid %u)", rank, r.host.c_str(), r.pid);
}

// ---------------------------------------------------------------------------------------------
// Progress thread: accepts connections and reads frames into the queues.

namespace {

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

// ---------------------------------------------------------------------------------------------
// Sending

void TcpBootstrap::connect_peer(int peer, Outbound& out, const Deadline& deadline) {
  SockAddr to = SockAddr::from_net(peers_[peer].listen);
  // A listener exists from registration to destruction, so "refused" means the peer is gone;
  // retry briefly anyway in case the kernel was only momentarily unable to take the connection.
  Deadline refused_window = Deadline::after(1.0);
  int err = 0, backoff_ms = 5;
  Fd fd;
  for (;;) {
    fd = connect_tcp(to, deadline, &err);
    if (fd) break;
    if (deadline.expired())
      fail(ErrorClass::Timeout,
           "bootstrap: rank %d could not connect to %s at %s within %s s (%s); check that this "
           "host can reach it (firewall, GNIO_SOCKET_IFNAME)",
           rank_, describe(peer).c_str(), to.to_string().c_str(), seconds_text(timeout_s_).c_str(),
           std::strerror(err));
    if (err == ECONNREFUSED && refused_window.expired())
      fail(ErrorClass::RemoteError,
           "bootstrap: rank %d: %s refuses connections at %s: it has exited or destroyed its "
           "Bootstrap",
           rank_, describe(peer).c_str(), to.to_string().c_str());
    nap(backoff_ms, deadline);
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
  unsigned char hello[kHelloBytes];
  encode_hello({Purpose::Peer, token_, rank_, size_}, hello);
  IoStatus st = send_all(fd.get(), hello, sizeof(hello), nullptr, 0, deadline, &err);
  if (st != IoStatus::Ok)
    fail(st == IoStatus::Timeout ? ErrorClass::Timeout : ErrorClass::RemoteError,
         "bootstrap: rank %d could not greet %s at %s: %s", rank_, describe(peer).c_str(),
         to.to_string().c_str(), st == IoStatus::Timeout ? "timed out" : std::strerror(err));
  out.fd = std::move(fd);
}

void TcpBootstrap::send_frame(int peer, FrameType type, std::uint16_t flags, std::int32_t tag,
                              const void* data, std::size_t bytes, const Deadline& deadline,
                              const std::string& what) {
  if (peer == rank_) return deliver_local(type, flags, tag, data, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!poisoned_.empty()) throw_poisoned();
  }
  Outbound& out = *out_[peer];
  std::lock_guard<std::mutex> lock(out.mutex);
  if (!out.broken.empty()) fail(ErrorClass::RemoteError, "%s", out.broken.c_str());
  if (!out.fd) connect_peer(peer, out, deadline);
  unsigned char head[kFrameHeaderBytes];
  encode_frame_header({type, flags, rank_, tag, bytes}, head);
  int err = 0;
  release_network_order_for_tsan();
  IoStatus st = send_all(out.fd.get(), head, sizeof(head), data, bytes, deadline, &err);
  if (st == IoStatus::Ok) return;
  // A partly written frame leaves the stream unusable: every later send to this peer fails too.
  out.fd.reset();
  if (st == IoStatus::Timeout)
    out.broken = format(
        "bootstrap: rank %d could not send %s (%zu bytes) to %s within %s s: it "
        "is not reading (stopped, hung, or overloaded)",
        rank_, what.c_str(), bytes, describe(peer).c_str(), seconds_text(timeout_s_).c_str());
  else
    out.broken = format(
        "bootstrap: rank %d: the connection to %s broke while sending %s (%s): "
        "it exited, crashed or aborted",
        rank_, describe(peer).c_str(), what.c_str(), std::strerror(err));
  fail(st == IoStatus::Timeout  ? ErrorClass::Timeout
       : st == IoStatus::Closed ? ErrorClass::RemoteError
                                : ErrorClass::SystemError,
       "%s", out.broken.c_str());
}

void TcpBootstrap::deliver_local(FrameType type, std::uint16_t flags, std::int32_t tag,
                                 const void* data, std::size_t bytes) {
  Message m{flags, std::vector<unsigned char>(bytes)};
  if (bytes) std::memcpy(m.data.data(), data, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_[rank_].queues[{static_cast<std::uint16_t>(type), tag}].push_back(std::move(m));
  }
  arrived_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// Receiving

void TcpBootstrap::throw_poisoned() {
  // Called with mutex_ held; copy first so the message survives the unlock during unwinding.
  std::string message = poisoned_;
  ErrorClass cls = poison_class_;
  throw Error(cls, message);
}

TcpBootstrap::Message TcpBootstrap::take(int peer, FrameType type, std::int32_t tag,
                                         std::uint16_t flags, std::size_t expect_bytes,
                                         const Deadline& deadline, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto key = std::make_pair(static_cast<std::uint16_t>(type), tag);
  for (;;) {
    if (!poisoned_.empty()) throw_poisoned();
    Inbound& in = in_[peer];
    auto it = in.queues.find(key);
    if (it != in.queues.end() && !it->second.empty()) {
      Message& front = it->second.front();
      if (type == FrameType::Coll && front.flags != flags) {
        std::uint16_t theirs = front.flags;
        lock.unlock();
        fail(ErrorClass::RemoteError,
             "bootstrap: collective mismatch: rank %d called %s but %s called %s as the same "
             "collective (#%d); every rank must call the same collectives in the same order",
             rank_, coll_name(flags), describe(peer).c_str(), coll_name(theirs), tag);
      }
      if (front.data.size() != expect_bytes) {
        std::size_t theirs = front.data.size();
        lock.unlock();
        if (type == FrameType::Data)
          fail(ErrorClass::InvalidArgument,
               "bootstrap: rank %d: recv of %zu bytes from %s with tag %d, but the message is "
               "%zu bytes (it stays queued)",
               rank_, expect_bytes, describe(peer).c_str(), tag, theirs);
        fail(ErrorClass::RemoteError,
             "bootstrap: %s mismatch: rank %d passed %zu bytes but %s passed %zu; every rank "
             "must pass the same size",
             coll_name(flags), rank_, expect_bytes, describe(peer).c_str(), theirs);
      }
      Message m = std::move(front);
      it->second.pop_front();
      if (it->second.empty()) in.queues.erase(it);
      acquire_network_order_for_tsan();
      return m;
    }
    if (in.closed) {
      std::string reason = in.close_reason;
      lock.unlock();
      fail(ErrorClass::RemoteError, "bootstrap: rank %d was waiting for %s from %s, but %s", rank_,
           what.c_str(), describe(peer).c_str(), reason.c_str());
    }
    if (deadline.expired()) {
      bool connected = in.connected;
      lock.unlock();
      fail(ErrorClass::Timeout,
           "bootstrap: rank %d timed out after %s s waiting for %s from %s (%s). Check that "
           "every rank makes the same bootstrap calls in the same order; GNIO_BOOTSTRAP_TIMEOUT "
           "sets the limit",
           rank_, seconds_text(timeout_s_).c_str(), what.c_str(), describe(peer).c_str(),
           connected ? "it is connected but has not sent it"
                     : "it never connected to this rank: stuck, dead, or unable to reach it");
    }
    arrived_.wait_for(lock, std::chrono::milliseconds(deadline.remaining_ms(1000)));
  }
}

// ---------------------------------------------------------------------------------------------
// Public operations

void TcpBootstrap::require_fits(std::size_t bytes, const char* what) const {
  GNIO_REQUIRE(bytes <= max_msg_,
               "bootstrap: %s %zu bytes exceeds GNIO_BOOTSTRAP_MAX_MSG=%llu; raise it "
               "(on every rank) or split the exchange",
               what, bytes, static_cast<unsigned long long>(max_msg_));
}

void TcpBootstrap::send(int peer, int tag, const void* data, std::size_t bytes) {
  GNIO_REQUIRE(peer >= 0 && peer < size_, "bootstrap: send to rank %d, but the job has ranks 0..%d",
               peer, size_ - 1);
  GNIO_REQUIRE(data || bytes == 0, "bootstrap: send of %zu bytes from a null pointer", bytes);
  require_fits(bytes, "send of");
  Deadline deadline = Deadline::after(timeout_s_);
  send_frame(peer, FrameType::Data, 0, tag, data, bytes, deadline,
             format("a message with tag %d", tag));
}

void TcpBootstrap::recv(int peer, int tag, void* data, std::size_t bytes) {
  GNIO_REQUIRE(peer >= 0 && peer < size_,
               "bootstrap: recv from rank %d, but the job has ranks 0..%d", peer, size_ - 1);
  GNIO_REQUIRE(data || bytes == 0, "bootstrap: recv of %zu bytes into a null pointer", bytes);
  Deadline deadline = Deadline::after(timeout_s_);
  Message m = take(peer, FrameType::Data, tag, 0, bytes, deadline,
                   format("a message with tag %d (%zu bytes)", tag, bytes));
  if (bytes) std::memcpy(data, m.data.data(), bytes);
}

void TcpBootstrap::abort_job(const Error& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_sent_) return;
    abort_sent_ = true;
    if (poisoned_.empty()) {
      poisoned_ = error.message();
      poison_class_ = error.error_class();
    }
  }
  // Best effort and bounded: tell every peer we can reach quickly, so ranks blocked on this one
  // fail now instead of at their timeout. Peers that already failed are skipped.
  ErrorPayload e{static_cast<std::uint32_t>(error.error_class()), error.message()};
  std::vector<unsigned char> payload = encode_error_payload(e);
  unsigned char head[kFrameHeaderBytes];
  encode_frame_header({FrameType::Abort, 0, rank_, 0, payload.size()}, head);
  Deadline budget = Deadline::after(1.0);
  for (int i = 1; i < size_ && !budget.expired(); ++i) {
    int peer = (rank_ + i) % size_;
    Outbound& out = *out_[peer];
    std::unique_lock<std::mutex> lock(out.mutex, std::try_to_lock);
    if (!lock.owns_lock() || !out.broken.empty()) continue;
    {
      std::lock_guard<std::mutex> in_lock(mutex_);
      if (in_[peer].closed) continue;
    }
    // Quietly: a peer that cannot be reached now is not worth more errors in the log.
    Deadline step = Deadline::after(std::min(0.25, budget.remaining_ms() / 1000.0));
    int err = 0;
    if (!out.fd) {
      Fd fd = connect_tcp(SockAddr::from_net(peers_[peer].listen), step, &err);
      unsigned char hello[kHelloBytes];
      encode_hello({Purpose::Peer, token_, rank_, size_}, hello);
      if (fd && send_all(fd.get(), hello, sizeof(hello), nullptr, 0, step, &err) == IoStatus::Ok)
        out.fd = std::move(fd);
    }
    if (out.fd && send_all(out.fd.get(), head, sizeof(head), payload.data(), payload.size(), step,
                           &err) != IoStatus::Ok)
      out.fd.reset();
    if (!out.fd)
      out.broken = format("bootstrap: rank %d aborted the job: %s", rank_, error.message().c_str());
  }
}

void TcpBootstrap::fail_job(ErrorClass error_class, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!poisoned_.empty()) return;
    poisoned_ = message;
    poison_class_ = error_class;
  }
  arrived_.notify_all();
}

template <class F>
void TcpBootstrap::collective(CollKind kind, F&& body) {
  std::lock_guard<std::mutex> coll_lock(coll_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!poisoned_.empty()) throw_poisoned();
  }
  auto seq = static_cast<std::int32_t>(++coll_seq_ & 0x7fffffff);
  Deadline deadline = Deadline::after(timeout_s_);
  GNIO_TRACE(Bootstrap, "rank %d: %s #%d", rank_, coll_name(static_cast<std::uint16_t>(kind)), seq);
  try {
    body(seq, deadline);
  } catch (const Error& e) {
    if (e.error_class() != ErrorClass::InvalidArgument) abort_job(e);
    throw;
  }
}

void TcpBootstrap::allgather(void* buf, std::size_t bytes) {
  GNIO_REQUIRE(buf || bytes == 0, "bootstrap: allgather into a null buffer");
  require_fits(bytes, "allgather (per rank) of");
  if (size_ == 1) return;
  auto* base = static_cast<unsigned char*>(buf);
  const auto flags = static_cast<std::uint16_t>(CollKind::Allgather);
  // Bruck's allgather in ceil(log2 size) rounds whenever its largest message (at most half the
  // ranks' slots) fits in a frame; the ring's size-1 steps otherwise. Both move
  // size-1 slots per rank; the rounds decide the latency at scale (14 instead of 16 383 at 16 k
  // ranks). Every rank makes the same choice: it depends on the size and the slot bytes only.
  // Round d carries min(d, size - d) slots: the last round (d = top, the largest power of two
  // below size) carries size - top, the one before top / 2.
  int top = 1;
  while (top * 2 < size_) top *= 2;
  const std::size_t largest = static_cast<std::size_t>(std::max(top / 2, size_ - top)) * bytes;
  if (largest <= max_msg_) {
    collective(CollKind::Allgather, [&](std::int32_t seq, const Deadline& deadline) {
      // held[j] is rank (rank_ - j)'s slot. Round d passes the first min(d, size - d) held slots
      // to rank + d and appends those of rank - d, so the targets are the barrier's (rank + 2^k).
      std::vector<unsigned char> held(static_cast<std::size_t>(size_) * bytes);
      if (bytes) std::memcpy(held.data(), base + static_cast<std::size_t>(rank_) * bytes, bytes);
      for (int d = 1; d < size_; d *= 2) {
        const int count = std::min(d, size_ - d);
        const std::size_t part = static_cast<std::size_t>(count) * bytes;
        send_frame((rank_ + d) % size_, FrameType::Coll, flags, seq, held.data(), part, deadline,
                   format("allgather #%d round %d", seq, d));
        const int from = (rank_ - d + size_) % size_;
        Message m = take(from, FrameType::Coll, seq, flags, part, deadline,
                         format("allgather #%d data (%d slots from rank %d)", seq, count, from));
        if (part)
          std::memcpy(held.data() + static_cast<std::size_t>(d) * bytes, m.data.data(), part);
      }
      for (int j = 1; j < size_ && bytes; ++j)  // held[0] is this rank's slot, already in place
        std::memcpy(base + static_cast<std::size_t>((rank_ - j + size_) % size_) * bytes,
                    held.data() + static_cast<std::size_t>(j) * bytes, bytes);
    });
    return;
  }
  collective(CollKind::Allgather, [&](std::int32_t seq, const Deadline& deadline) {
    // Ring: in step s, pass on the slot received in step s-1 (own slot first).
    const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    for (int step = 0; step < size_ - 1; ++step) {
      int send_slot = (rank_ - step + size_) % size_;
      int recv_slot = (rank_ - step - 1 + 2 * size_) % size_;
      send_frame(next, FrameType::Coll, flags, seq, base + send_slot * bytes, bytes, deadline,
                 format("allgather #%d step %d", seq, step));
      Message m = take(prev, FrameType::Coll, seq, flags, bytes, deadline,
                       format("allgather #%d data (slot of rank %d)", seq, recv_slot));
      if (bytes) std::memcpy(base + recv_slot * bytes, m.data.data(), bytes);
    }
  });
}

void TcpBootstrap::broadcast(void* buf, std::size_t bytes, int root) {
  GNIO_REQUIRE(root >= 0 && root < size_,
               "bootstrap: broadcast from root %d, but the job has ranks 0..%d", root, size_ - 1);
  GNIO_REQUIRE(buf || bytes == 0, "bootstrap: broadcast of a null buffer");
  require_fits(bytes, "broadcast of");
  if (size_ == 1) return;
  collective(CollKind::Broadcast, [&](std::int32_t seq, const Deadline& deadline) {
    // Binomial tree rooted at `root`, in ranks relative to it.
    const auto flags = static_cast<std::uint16_t>(CollKind::Broadcast);
    const int me = (rank_ - root + size_) % size_;
    int mask = 1;
    while (mask < size_) {
      if (me & mask) {
        int from = (me - mask + root) % size_;
        Message m = take(from, FrameType::Coll, seq, flags, bytes, deadline,
                         format("broadcast #%d data (root %d)", seq, root));
        if (bytes) std::memcpy(buf, m.data.data(), bytes);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (me + mask < size_)
        send_frame((me + mask + root) % size_, FrameType::Coll, flags, seq, buf, bytes, deadline,
                   format("broadcast #%d data", seq));
  });
}

void TcpBootstrap::barrier() {
  if (size_ == 1) return;
  collective(CollKind::Barrier, [&](std::int32_t seq, const Deadline& deadline) {
    // Dissemination: after round k every rank has heard, directly or not, from 2^(k+1) ranks.
    const auto flags = static_cast<std::uint16_t>(CollKind::Barrier);
    for (int dist = 1, round = 0; dist < size_; dist <<= 1, ++round) {
      send_frame((rank_ + dist) % size_, FrameType::Coll, flags, seq, nullptr, 0, deadline,
                 format("barrier #%d round %d", seq, round));
      take((rank_ - dist + size_) % size_, FrameType::Coll, seq, flags, 0, deadline,
           format("barrier #%d round %d", seq, round));
    }
  });
}

}  // namespace bootstrap

// ---------------------------------------------------------------------------------------------
// Factories

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
