// TcpBootstrap's life: construction, the rendezvous with the root, destruction, and failing the
// job (a poisoned bootstrap, the abort sent to the peers). The progress thread, point-to-point
// messages and collectives are in tcp_bootstrap_progress.cpp, tcp_bootstrap_messages.cpp and
// tcp_bootstrap_collectives.cpp.
#include "bootstrap/tcp_bootstrap.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "base/fail.hpp"
#include "base/thread_name.hpp"
#include "bootstrap/tcp_bootstrap_shared.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"

namespace gnio::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

std::uint32_t clamp_ms(int ms) {
  return static_cast<std::uint32_t>(std::max(ms, 1));
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
// Failing the job

void TcpBootstrap::throw_poisoned() {
  // Called with mutex_ held; copy first so the message survives the unlock during unwinding.
  std::string message = poisoned_;
  ErrorClass cls = poison_class_;
  throw Error(cls, message);
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

}  // namespace gnio::bootstrap
