// TcpBootstrap's point-to-point messages: outgoing connections and frames, the receiver's queues,
// and the public send and recv built on them (the collectives use the same two steps).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap_shared.hpp"

namespace gnio::bootstrap {

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

}  // namespace gnio::bootstrap
