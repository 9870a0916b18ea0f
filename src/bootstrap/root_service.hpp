// The rendezvous root: a background thread that collects every rank's registration (job token,
// rank, size, listener address) and answers each with the full address table, then exits.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "bootstrap/socket.hpp"

namespace gnio::bootstrap {

/// One job's rendezvous service (NCCL's bootstrap root). Runs on its own thread from
/// construction until every rank got the table, the ranks' deadlines pass (then every waiting
/// rank gets an Error(Timeout) frame naming the ranks that never arrived), nobody registers within
/// GNIO_BOOTSTRAP_TIMEOUT of construction, or the object is destroyed.
///
/// The thread never blocks on one client: one poll() loop drives the listener and every
/// connection, each non-blocking with a deadline. Connections that are not a well-formed
/// registration of this job (port scans, garbage, another job's token, oversized frames,
/// stalled half-sent hellos) are dropped, logged at WARN once per source address, and never take
/// a rank slot. A registered rank that disconnects before the table is sent frees its slot.
class RootService {
 public:
  /// Binds `bind_addr` (port 0 picks a free one) and starts the thread. Throws Error(SystemError)
  /// when the address cannot be bound.
  RootService(const SockAddr& bind_addr, std::uint64_t token);
  /// Stops the thread (if still running) and joins it.
  ~RootService();
  RootService(const RootService&) = delete;
  RootService& operator=(const RootService&) = delete;

  /// Where ranks connect (the bound address with its port).
  const SockAddr& address() const { return address_; }
  /// True once the thread has finished its work (it may still need joining).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  /// Asks the thread to stop and joins it. Idempotent.
  void stop();

 private:
  void run() noexcept;

  SockAddr address_;
  std::uint64_t token_;
  double idle_timeout_s_;
  double hello_timeout_s_;
  Fd listener_;
  Waker waker_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace gnio::bootstrap
