#include "bootstrap/root_service.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "base/fail.hpp"
#include "base/thread_name.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr Clock::time_point kNever = Clock::time_point::max();
// Unauthenticated connections allowed at once; beyond this the oldest is dropped, so a flood of
// idle connections cannot exhaust descriptors.
constexpr std::size_t kMaxHandshaking = 512;

Clock::time_point after(double seconds) {
  if (seconds <= 0) return kNever;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
int ms_until(Clock::time_point t, int cap_ms) {
  if (t == kNever) return cap_ms;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<long long>(ms, 0, cap_ms));
}
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The root's view of one connection.
struct Client {
  enum class Phase {
    Handshake,   // reading hello + registration; unauthenticated
    Registered,  // holds a rank slot; waits for the table
    Replying,    // writing the table (or an error) back
    Draining,    // reply written and write side shut; waiting for the rank to close
    Done,
  };
  Fd fd;
  std::string peer;       // "ip:port"
  std::string peer_host;  // "ip"
  StreamParser parser{true, kRankRecordBytes};
  Phase phase = Phase::Handshake;
  Clock::time_point deadline;  // of the current phase
  Hello hello;
  RankRecord record;
  Clock::time_point arrived;
  Clock::time_point gives_up = kNever;  // when the rank stops waiting for the table
  std::vector<unsigned char> out;
  std::size_t out_off = 0;
};

class RootLoop {
 public:
  RootLoop(int listener, int waker, const SockAddr& address, std::uint64_t token,
           double idle_timeout_s, double hello_timeout_s, const std::atomic<bool>& stop)
      : listener_(listener),
        waker_(waker),
        address_(address),
        where_("root " + address.to_string()),
        token_(token),
        idle_deadline_(after(idle_timeout_s)),
        idle_timeout_s_(idle_timeout_s),
        hello_timeout_s_(hello_timeout_s),
        stop_(stop),
        drops_(where_) {}

  void run();

 private:
  enum class Stage { Gathering, Replying, Done };

  void accept_all();
  void on_readable(Client& c);
  void on_writable(Client& c);
  void on_hello(Client& c);
  void on_registration(Client& c, std::vector<unsigned char> payload);
  void drop(Client& c, const char* reason);
  void drop(Client& c, const std::string& reason) { drop(c, reason.c_str()); }
  void unregister(Client& c, const std::string& why);
  void refuse(Client& c, ErrorClass cls, const std::string& message);
  void start_reply(Client& c, FrameType type, const std::vector<unsigned char>& payload,
                   Clock::time_point deadline);
  void send_tables();
  void report_missing();
  void check_deadlines();
  Clock::time_point report_time() const;
  Clock::time_point next_deadline() const;

  int listener_;
  int waker_;
  SockAddr address_;
  std::string where_;
  std::uint64_t token_;
  Clock::time_point idle_deadline_;
  double idle_timeout_s_;
  double hello_timeout_s_;
  const std::atomic<bool>& stop_;
  DropLog drops_;

  Stage stage_ = Stage::Gathering;
  std::deque<std::unique_ptr<Client>> clients_;
  std::int32_t job_size_ = 0;
  std::vector<Client*> by_rank_;
  int registered_ = 0;
  Clock::time_point first_arrival_ = kNever;
  Clock::time_point accept_paused_until_{};
  bool accept_warned_ = false;
};

void RootLoop::drop(Client& c, const char* reason) {
  if (c.phase == Client::Phase::Done) return;
  drops_.drop(c.peer_host, c.peer, reason);
  c.fd.reset();
  c.phase = Client::Phase::Done;
}

void RootLoop::unregister(Client& c, const std::string& why) {
  int rank = c.hello.rank;
  if (by_rank_.size() > static_cast<std::size_t>(rank) && by_rank_[rank] == &c) {
    by_rank_[rank] = nullptr;
    --registered_;
  }
  GNIO_WARN(Bootstrap,
            "%s: rank %d (%s pid %u, %s) %s before all ranks arrived; its slot is free "
            "again (%d of %d ranks registered)",
            where_.c_str(), rank, c.record.host.c_str(), c.record.pid, c.peer.c_str(), why.c_str(),
            registered_, job_size_);
  c.fd.reset();
  c.phase = Client::Phase::Done;
  if (registered_ == 0) {
    job_size_ = 0;
    by_rank_.clear();
    first_arrival_ = kNever;
    idle_deadline_ = after(idle_timeout_s_);
  }
}

void RootLoop::start_reply(Client& c, FrameType type, const std::vector<unsigned char>& payload,
                           Clock::time_point deadline) {
  FrameHeader h;
  h.type = type;
  h.src = -1;
  h.length = payload.size();
  c.out.resize(kFrameHeaderBytes + payload.size());
  encode_frame_header(h, c.out.data());
  std::memcpy(c.out.data() + kFrameHeaderBytes, payload.data(), payload.size());
  c.out_off = 0;
  c.phase = Client::Phase::Replying;
  c.deadline = deadline;
  on_writable(c);  // most replies fit the socket buffer: done without waiting for poll
}

// Answers a well-formed request that cannot be served (another job, a duplicate rank) with an
// Error frame, so that rank fails fast with a clear message instead of timing out.
void RootLoop::refuse(Client& c, ErrorClass cls, const std::string& message) {
  GNIO_WARN(Bootstrap, "%s refused a registration from %s: %s", where_.c_str(), c.peer.c_str(),
            message.c_str());
  ErrorPayload e{static_cast<std::uint32_t>(cls), message};
  start_reply(c, FrameType::Error, encode_error_payload(e), after(1.0));
}

void RootLoop::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd =
        ::accept4(listener_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors or memory: stop accepting for a moment instead of spinning.
      if (!accept_warned_)
        GNIO_WARN(Bootstrap, "%s: accept failed (%s); pausing accepts for 100 ms", where_.c_str(),
                  std::strerror(errno));
      accept_warned_ = true;
      accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    auto c = std::make_unique<Client>();
    c->fd.reset(fd);
    SockAddr peer(reinterpret_cast<sockaddr*>(&ss), len);
    c->peer = peer.to_string();
    c->peer_host = peer.host_string();
    c->deadline = after(hello_timeout_s_);
    set_nodelay(fd);
    std::size_t handshaking = 0;
    for (const auto& other : clients_)
      if (other->phase == Client::Phase::Handshake) ++handshaking;
    if (handshaking >= kMaxHandshaking) {
      for (auto& other : clients_)
        if (other->phase == Client::Phase::Handshake) {
          drop(*other, "too many unfinished handshakes at once; dropped the oldest");
          break;
        }
    }
    clients_.push_back(std::move(c));
  }
}

void RootLoop::on_hello(Client& c) {
  const Hello& h = c.parser.hello();
  if (h.purpose != Purpose::Register) {
    drop(c, "a gnio connection that is not a registration (wrong port?)");
    return;
  }
  if (h.token != token_) {
    refuse(c, ErrorClass::InvalidArgument,
           format("the bootstrap root at %s belongs to another job (job token differs). Two jobs "
                  "are using the same root address and port, or the ranks got different unique "
                  "ids / GNIO_JOB_TOKEN values",
                  address_.to_string().c_str()));
    return;
  }
  c.hello = h;
}

void RootLoop::on_registration(Client& c, std::vector<unsigned char> payload) {
  const FrameHeader& f = c.parser.header();
  if (f.type != FrameType::Register || f.src != c.hello.rank || f.length != kRankRecordBytes) {
    drop(c, "a malformed registration frame");
    return;
  }
  auto record = decode_rank_record(payload.data(), payload.size());
  if (!record) {
    drop(c, "a malformed registration record");
    return;
  }
  const Hello& h = c.hello;
  if (stage_ != Stage::Gathering) {
    refuse(c, ErrorClass::InvalidArgument,
           format("rank %d registered with the root %s after all ranks had already met; two "
                  "processes were started as rank %d, or the job was restarted with the same "
                  "unique id",
                  h.rank, address_.to_string().c_str(), h.rank));
    return;
  }
  if (job_size_ != 0 && h.size != job_size_) {
    refuse(c, ErrorClass::InvalidArgument,
           format("rank %d joined with size %d, but the ranks already at the root %s joined with "
                  "size %d; every rank must pass the same size",
                  h.rank, h.size, address_.to_string().c_str(), job_size_));
    return;
  }
  if (job_size_ != 0 && by_rank_[h.rank]) {
    const Client& first = *by_rank_[h.rank];
    refuse(c, ErrorClass::InvalidArgument,
           format("rank %d is already registered at the root %s by %s pid %u (%s); two processes "
                  "were started as rank %d",
                  h.rank, address_.to_string().c_str(), first.record.host.c_str(), first.record.pid,
                  first.peer.c_str(), h.rank));
    return;
  }
  if (job_size_ == 0) {
    job_size_ = h.size;
    by_rank_.assign(static_cast<std::size_t>(job_size_), nullptr);
    first_arrival_ = Clock::now();
  }
  c.record = std::move(*record);
  c.phase = Client::Phase::Registered;
  c.arrived = Clock::now();
  c.gives_up = c.record.wait_ms ? c.arrived + std::chrono::milliseconds(c.record.wait_ms) : kNever;
  by_rank_[h.rank] = &c;
  ++registered_;
  GNIO_TRACE(Bootstrap, "%s: rank %d of %d registered from %s (%s pid %u), %d arrived",
             where_.c_str(), h.rank, job_size_, c.peer.c_str(), c.record.host.c_str(), c.record.pid,
             registered_);
  if (registered_ == job_size_) send_tables();
}

void RootLoop::send_tables() {
  std::vector<RankRecord> table(static_cast<std::size_t>(job_size_));
  for (int r = 0; r < job_size_; ++r) table[r] = by_rank_[r]->record;
  std::vector<unsigned char> payload = encode_table(table);
  GNIO_INFO(Bootstrap, "%s: all %d ranks arrived after %.3f s; sending the table", where_.c_str(),
            job_size_, seconds_since(first_arrival_));
  stage_ = Stage::Replying;
  for (int r = 0; r < job_size_; ++r) {
    Client& c = *by_rank_[r];
    // A rank that stops reading cannot hold the root longer than it would wait itself.
    Clock::time_point deadline =
        c.gives_up == kNever ? after(hello_timeout_s_ * 4 + 10) : c.gives_up;
    start_reply(c, FrameType::Table, payload, deadline);
  }
}

void RootLoop::report_missing() {
  std::vector<int> missing;
  for (int r = 0; r < job_size_; ++r)
    if (!by_rank_[r]) missing.push_back(r);
  // The earliest deadline decides when we report; name its timeout, which is the user's setting.
  const Client* first = nullptr;
  for (const Client* c : by_rank_)
    if (c && (!first || c->gives_up < first->gives_up)) first = c;
  double timeout_s = first && first->record.timeout_ms ? first->record.timeout_ms / 1000.0
                                                       : seconds_since(first_arrival_);
  std::string message = format(
      "bootstrap: %zu of %d ranks never arrived at the root %s within %s s: %s %s. Check that "
      "every rank was started (with the same unique id / MASTER_ADDR) and can reach the root "
      "(GNIO_SOCKET_IFNAME, GNIO_BOOTSTRAP_ADDR); raise GNIO_BOOTSTRAP_TIMEOUT if ranks start "
      "slowly",
      missing.size(), job_size_, address_.to_string().c_str(), seconds_text(timeout_s).c_str(),
      missing.size() == 1 ? "rank" : "ranks", format_rank_list(missing).c_str());
  GNIO_WARN(Bootstrap, "%s", message.c_str());
  stage_ = Stage::Replying;
  ErrorPayload e{static_cast<std::uint32_t>(ErrorClass::Timeout), message};
  std::vector<unsigned char> payload = encode_error_payload(e);
  for (Client* c : by_rank_)
    if (c) start_reply(*c, FrameType::Error, payload, after(1.0));
}

// The moment the root must report missing ranks: shortly before the first registered rank gives
// up, so that rank still receives the list of who is missing.
Clock::time_point RootLoop::report_time() const {
  Clock::time_point earliest = kNever;
  for (const Client* c : by_rank_)
    if (c && c->gives_up < earliest) earliest = c->gives_up;
  if (earliest == kNever) return kNever;
  const Client* first = nullptr;
  for (const Client* c : by_rank_)
    if (c && c->gives_up == earliest) first = c;
  auto margin =
      std::chrono::milliseconds(std::clamp<std::uint32_t>(first->record.wait_ms / 10, 100, 1000));
  return earliest - margin;
}

void RootLoop::on_readable(Client& c) {
  // Bounded per wake-up, so one fast sender cannot starve the others.
  for (int round = 0; round < 64 && c.phase != Client::Phase::Done; ++round) {
    std::span<unsigned char> buf = c.parser.next_buffer();
    unsigned char sink[256];
    bool discard = c.phase != Client::Phase::Handshake;
    void* into = discard ? sink : buf.data();
    std::size_t want = discard ? sizeof(sink) : buf.size();
    ssize_t n = ::recv(c.fd.get(), into, want, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      const char* why = n == 0 ? "closed" : std::strerror(errno);
      switch (c.phase) {
        case Client::Phase::Handshake:
          drop(c, c.parser.bytes_seen() == 0
                      ? format("connected and %s without sending anything (a port scan?)", why)
                      : format("%s after %llu bytes of an incomplete hello/registration", why,
                               static_cast<unsigned long long>(c.parser.bytes_seen())));
          break;
        case Client::Phase::Registered:
          unregister(c, n == 0 ? "disconnected" : format("lost its connection (%s)", why));
          break;
        default:
          // The rank has its reply (Draining) or went away mid-reply; either way we are done.
          c.fd.reset();
          c.phase = Client::Phase::Done;
      }
      return;
    }
    if (discard) {
      if (c.phase == Client::Phase::Registered)
        unregister(c, "sent unexpected bytes after registering (protocol violation)");
      continue;  // Replying/Draining: the rank has nothing to say; ignore
    }
    switch (c.parser.commit(static_cast<std::size_t>(n))) {
      case StreamParser::Event::NeedMore: break;
      case StreamParser::Event::Error: drop(c, c.parser.error()); return;
      case StreamParser::Event::Hello: on_hello(c); break;
      case StreamParser::Event::Frame: on_registration(c, c.parser.take_payload()); return;
    }
  }
}

void RootLoop::on_writable(Client& c) {
  while (c.phase == Client::Phase::Replying && c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      GNIO_TRACE(Bootstrap, "%s: reply to %s failed: %s", where_.c_str(), c.peer.c_str(),
                 std::strerror(errno));
      c.fd.reset();
      c.phase = Client::Phase::Done;
      return;
    }
    c.out_off += static_cast<std::size_t>(n);
  }
  if (c.phase == Client::Phase::Replying) {
    // Half-close and wait for the rank to close: closing now could reset the connection and
    // destroy the reply before the rank read it.
    ::shutdown(c.fd.get(), SHUT_WR);
    c.out.clear();
    c.out.shrink_to_fit();
    c.phase = Client::Phase::Draining;
  }
}

void RootLoop::check_deadlines() {
  Clock::time_point now = Clock::now();
  for (auto& cp : clients_) {
    Client& c = *cp;
    if (c.phase == Client::Phase::Handshake && now >= c.deadline)
      drop(c, c.parser.bytes_seen() == 0
                  ? format("sent nothing within %s s of connecting (GNIO_BOOTSTRAP_HELLO_TIMEOUT)",
                           seconds_text(hello_timeout_s_).c_str())
                  : format("stalled after %llu bytes of its hello/registration for %s s (a "
                           "slow or stuck client; GNIO_BOOTSTRAP_HELLO_TIMEOUT)",
                           static_cast<unsigned long long>(c.parser.bytes_seen()),
                           seconds_text(hello_timeout_s_).c_str()));
    else if ((c.phase == Client::Phase::Replying || c.phase == Client::Phase::Draining) &&
             now >= c.deadline) {
      if (c.phase == Client::Phase::Replying)
        GNIO_WARN(Bootstrap, "%s: rank %d (%s) did not read its reply in time", where_.c_str(),
                  c.hello.rank, c.peer.c_str());
      c.fd.reset();
      c.phase = Client::Phase::Done;
    }
  }
  while (!clients_.empty() && clients_.front()->phase == Client::Phase::Done) clients_.pop_front();
  // Done clients in the middle stay until they reach the front; they hold no descriptor.
  if (clients_.size() > 4 * kMaxHandshaking)
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [](const auto& c) { return c->phase == Client::Phase::Done; }),
                   clients_.end());

  if (stage_ == Stage::Gathering) {
    if (registered_ > 0 && now >= report_time()) {
      report_missing();
    } else if (registered_ == 0 && now >= idle_deadline_) {
      GNIO_WARN(Bootstrap,
                "%s: no rank registered within %s s (GNIO_BOOTSTRAP_TIMEOUT); the root "
                "service stops and this unique id can no longer be used",
                where_.c_str(), seconds_text(idle_timeout_s_).c_str());
      stage_ = Stage::Done;
    }
  }
  if (stage_ == Stage::Replying) {
    bool busy = std::any_of(clients_.begin(), clients_.end(), [](const auto& c) {
      return c->phase == Client::Phase::Replying || c->phase == Client::Phase::Draining;
    });
    if (!busy) stage_ = Stage::Done;
  }
}

Clock::time_point RootLoop::next_deadline() const {
  Clock::time_point t = kNever;
  for (const auto& c : clients_)
    if (c->phase != Client::Phase::Registered && c->phase != Client::Phase::Done)
      t = std::min(t, c->deadline);
  if (stage_ == Stage::Gathering) t = std::min(t, registered_ ? report_time() : idle_deadline_);
  if (accept_paused_until_ > Clock::now()) t = std::min(t, accept_paused_until_);
  return t;
}

void RootLoop::run() {
  std::vector<pollfd> fds;
  std::vector<Client*> owners;
  while (!stop_.load(std::memory_order_acquire)) {
    check_deadlines();
    if (stage_ == Stage::Done) break;
    fds.clear();
    owners.clear();
    fds.push_back({waker_, POLLIN, 0});
    owners.push_back(nullptr);
    // Once the table goes out the job is complete: refuse newcomers instead of accepting them.
    bool accepting = stage_ == Stage::Gathering && Clock::now() >= accept_paused_until_;
    if (accepting) {
      fds.push_back({listener_, POLLIN, 0});
      owners.push_back(nullptr);
    }
    for (auto& c : clients_) {
      if (c->phase == Client::Phase::Done) continue;
      short events = POLLIN;
      if (c->phase == Client::Phase::Replying) events |= POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
      owners.push_back(c.get());
    }
    int rc = ::poll(fds.data(), fds.size(), ms_until(next_deadline(), 1000));
    if (rc < 0) {
      if (errno == EINTR) continue;
      GNIO_WARN(Bootstrap, "%s: poll failed: %s", where_.c_str(), std::strerror(errno));
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == waker_ && !owners[i]) continue;  // stop_ is checked by the loop
      if (!owners[i]) {
        accept_all();
        continue;
      }
      Client& c = *owners[i];
      if (c.phase == Client::Phase::Done) continue;
      if (fds[i].revents & POLLOUT) on_writable(c);
      if (c.phase != Client::Phase::Done && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        on_readable(c);
    }
  }
  if (drops_.dropped())
    GNIO_INFO(Bootstrap, "%s dropped %llu stray connections in all", where_.c_str(),
              static_cast<unsigned long long>(drops_.dropped()));
}

}  // namespace

RootService::RootService(const SockAddr& bind_addr, std::uint64_t token)
    : token_(token),
      idle_timeout_s_(config_seconds("GNIO_BOOTSTRAP_TIMEOUT")),
      hello_timeout_s_(config_seconds("GNIO_BOOTSTRAP_HELLO_TIMEOUT")) {
  listener_ = listen_tcp(bind_addr, "bootstrap root");
  address_ = local_address(listener_.get());
  thread_ = std::thread([this] {
    name_this_thread("gnio-boot-root");
    run();
  });
  GNIO_INFO(Bootstrap, "root service listening on %s", address_.to_string().c_str());
}

RootService::~RootService() {
  stop();
}

void RootService::stop() {
  stop_.store(true, std::memory_order_release);
  waker_.notify();
  if (thread_.joinable()) thread_.join();
}

void RootService::run() noexcept {
  try {
    RootLoop loop(listener_.get(), waker_.fd(), address_, token_, idle_timeout_s_, hello_timeout_s_,
                  stop_);
    loop.run();
  } catch (const std::exception& e) {
    GNIO_WARN(Bootstrap, "root service %s failed: %s", address_.to_string().c_str(), e.what());
  } catch (...) {
    GNIO_WARN(Bootstrap, "root service %s failed with an unknown exception",
              address_.to_string().c_str());
  }
  listener_.reset();  // later connection attempts are refused at once
  finished_.store(true, std::memory_order_release);
}

}  // namespace gnio::bootstrap
