// A communicator's failures: a lost peer or link (the abort word device waits watch), the flight
// recorder's dump, turning the device's stall record into an Error (CommImpl::check), and
// gnio::Comm's check, synchronize (bounded, draining the stream after a failure), abort and
// aborted.
#include <chrono>
#include <exception>
#include <mutex>
#include <string>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "core/comm_impl.hpp"
#include "gnio/comm.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy.hpp"

namespace gnio {

namespace detail {

void CommImpl::on_peer_lost(int rank, const std::string& what) noexcept {
  {
    std::lock_guard<std::mutex> lock(loss_mutex);
    if (lost_rank >= 0) {
      GNIO_WARN(Init, "rank %d: also lost: %s", bootstrap->rank(), what.c_str());
      return;
    }
    lost_rank = rank;
    loss = what;
    // The host-side flags before the abort word (a host check after a device wait that the
    // abort ended must find them), and all of it under the lock with lost_rank: a transport
    // failure at the same moment (on_link_lost) either finds the word set (and leaves it) or
    // comes first; never lost_rank set but the word still free, which would let it abort the
    // device without naming the rank.
    peer_lost.store(true, std::memory_order_release);
    aborted.store(true);
    abort_device_for(rank);
  }
  GNIO_WARN(Init, "rank %d: %s; aborting the communicator", bootstrap->rank(), what.c_str());
  // After the abort word: writing the file must not delay stopping the device waits.
  dump_flight(FlightDump::PeerLost, what);
  // Bootstrap calls waiting on the dead rank (or on ranks waiting on it) end now, not at
  // GNIO_BOOTSTRAP_TIMEOUT: every survivor learns of the loss from its own watcher.
  if (auto* tcp = dynamic_cast<bootstrap::TcpBootstrap*>(bootstrap.get())) {
    try {
      tcp->fail_job(ErrorClass::RemoteError,
                    format("rank %d: %s", bootstrap->rank(), what.c_str()));
    } catch (...) {
      // Only allocation can throw here; the abort word above already stops the device side.
    }
  }
}

void CommImpl::dump_flight(FlightDump reason, const std::string& detail) noexcept {
  if (!flight.enabled()) return;
  const unsigned bit = static_cast<unsigned>(reason);
  if (flight_dumped.fetch_or(bit) & bit) return;
  static const char* const kReasons[] = {"timeout", "remote-error", "abort", "peer-lost"};
  const char* name = kReasons[bit == 1 ? 0 : bit == 2 ? 1 : bit == 4 ? 2 : 3];
  const int rank = bootstrap->rank();
  try {
    const std::string path = flight_dump_path(flight_dir, heap_id, rank);
    std::string error;
    if (flight.dump(path, heap_id, rank, bootstrap->size(), name, detail, &error))
      GNIO_WARN(Init,
                "rank %d: flight recorder (%s): wrote %s; run gnio-flight on every rank's file to "
                "see which rank is behind",
                rank, name, path.c_str());
    else
      GNIO_WARN(Init, "rank %d: flight recorder (%s): cannot write %s (GNIO_FLIGHT_RECORDER_DIR)",
                rank, name, error.c_str());
  } catch (...) {
    // Out of memory while reporting another failure: the original error still surfaces.
  }
}

void CommImpl::on_link_lost(int rank) noexcept {
  std::lock_guard<std::mutex> lock(loss_mutex);
  // A rank the watcher declared lost, or any earlier abort, keeps its code and rank.
  if (lost_rank >= 0 || control_stopped(*control, dev::Order::Acquire)) return;
  abort_device_for(rank);
}

void CommImpl::abort_device_for(int rank) noexcept {
  // Device waits read failed_rank only after they see kAbortPeerLost (acquire).
  dev::atomic_store(&control->failed_rank, static_cast<std::uint32_t>(rank), dev::Order::Relaxed);
  dev::atomic_store(&control->abort, kAbortPeerLost, dev::Order::Release);
}

void CommImpl::check_alive() const {
  if (!peer_lost.load(std::memory_order_acquire)) return;
  std::string what;
  {
    std::lock_guard<std::mutex> lock(loss_mutex);
    what = loss;
  }
  fail(ErrorClass::RemoteError,
       "rank %d: %s. The communicator is aborted: destroy it (and end the job, or build a new "
       "one without that rank)",
       bootstrap->rank(), what.c_str());
}

void CommImpl::check() const {
  // A lost rank explains whatever the device saw afterwards (a wait on it timing out).
  check_alive();
  if (proxy) proxy->check();
  const StallRecord& r = control->stall;
  if (dev::atomic_load(const_cast<std::uint32_t*>(&r.state), dev::Order::Acquire) == 2u) {
    static const char* kCmp[] = {"==", "!=", ">", ">=", "<", "<="};
    std::string where = format("%s at %s:%u", r.op, r.file, r.line);
    switch (r.status) {
      case Status::Timeout:
        fail(ErrorClass::Timeout,
             "rank %d: device wait timed out after %.3f s in %s: waited for the word at %s to be "
             "%s %llu, last saw %llu%s. The peer that should have written it is stalled, dead or "
             "never got there; raise GNIO_TIMEOUT if it is just slow",
             r.rank, r.waited_ns / 1e9, where.c_str(), describe_offset(r.heap_offset).c_str(),
             kCmp[r.cmp < 6 ? r.cmp : 0], static_cast<unsigned long long>(r.expected),
             static_cast<unsigned long long>(r.seen),
             r.peer >= 0 ? format(" (expected from rank %d)", r.peer).c_str() : "");
      case Status::RemoteError:
        fail(ErrorClass::RemoteError,
             "rank %d: %s: rank %d failed this call (a wait there timed out or the call hit an "
             "error) and published a failure mark instead of its progress, so no result of the "
             "call is reported as done; that rank's own error says why. The communicator is "
             "aborted",
             r.rank, where.c_str(), r.peer);
      case Status::Unsupported:
        fail(ErrorClass::Unsupported,
             "rank %d: %s targeted rank %d, which no transport reaches (it is on another node and "
             "%s)",
             r.rank, where.c_str(), r.peer,
             proxy ? "this collective algorithm loads and stores peers' memory, which only ranks "
                     "of one node can; across nodes collectives run oneshot or ring "
                     "(CollAlgo::Auto, OneShot or Ring)"
                   : "no network transport is configured: GNIO_NET=none, or the cuda backend");
      case Status::InvalidArgument:
        // Two-sided messages (gnio/device/channel.hpp) say what was wrong through the comparison:
        // Le = the message reached `seen` bytes against a buffer of `expected`; Lt = no channel
        // (peer, tag `seen`) in a set of `expected` tags.
        if (r.cmp == static_cast<std::uint32_t>(Cmp::Le))
          fail(ErrorClass::InvalidArgument,
               "rank %d: %s: the message from rank %d does not fit the buffer: it reached %llu "
               "bytes, the buffer holds %llu (nothing was written past it)",
               r.rank, where.c_str(), r.peer, static_cast<unsigned long long>(r.seen),
               static_cast<unsigned long long>(r.expected));
        if (r.cmp == static_cast<std::uint32_t>(Cmp::Lt))
          fail(ErrorClass::InvalidArgument,
               "rank %d: %s: no channel to or from rank %d with tag %llu (the set has %llu tags "
               "and the communicator %d ranks)",
               r.rank, where.c_str(), r.peer, static_cast<unsigned long long>(r.seen),
               static_cast<unsigned long long>(r.expected), bootstrap->size());
        fail(ErrorClass::InvalidArgument,
             "rank %d: %s got a bad argument: peer %d, %s, %llu bytes (heap holds %llu bytes per "
             "rank; fetch the DeviceComm again after alloc)",
             r.rank, where.c_str(), r.peer, describe_offset(r.heap_offset).c_str(),
             static_cast<unsigned long long>(r.expected), static_cast<unsigned long long>(r.seen));
      default:
        fail(ErrorClass::Internal, "rank %d: device error %u in %s", r.rank,
             static_cast<unsigned>(r.status), where.c_str());
    }
  }
  if (aborted.load()) {
    // A lost rank or a transport failure recorded since the checks above says more.
    check_alive();
    if (proxy) proxy->check();
    fail(ErrorClass::RemoteError, "rank %d: the communicator was aborted", bootstrap->rank());
  }
}

}  // namespace detail

namespace {

/// Runs `body`; a Timeout or RemoteError it throws first dumps the flight recorder.
template <class F>
void dumping_failures(detail::CommImpl& impl, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.error_class() == ErrorClass::Timeout)
      impl.dump_flight(detail::FlightDump::Timeout, e.message());
    else if (e.error_class() == ErrorClass::RemoteError)
      impl.dump_flight(detail::FlightDump::RemoteError, e.message());
    throw;
  }
}

/// Comm::synchronize without the recording. Once the communicator failed it still lets the stream
/// drain (every gnio wait ends at the abort flag) before it throws: the caller may free or reuse
/// what the queued work reads and writes once the call is over, as after a successful one.
void synchronize_stream(detail::CommImpl& impl, StreamRef stream) {
  constexpr double kDrainAfterFailure_s = 30;
  constexpr std::chrono::microseconds kFailureCheck{10000};
  const double limit = impl.timeout_s > 0 ? impl.timeout_s + 30 : 0;
  Deadline deadline = Deadline::after(limit);
  std::exception_ptr failure;
  Deadline drain = Deadline::never();
  for (;;) {
    // Woken when the stream ends; every kFailureCheck meanwhile the communicator's failures
    // (a peer lost, the proxy's link cut) are looked at, so a wait they end does not outlast them.
    if (impl.backend->stream_wait_idle(stream, kFailureCheck)) {
      if (failure) {
        // The stream's own error (work the abort cut short) follows from the failure.
        try {
          impl.backend->stream_synchronize(stream);
        } catch (const std::exception&) {
        }
        std::rethrow_exception(failure);
      }
      impl.backend->stream_synchronize(stream);  // surfaces errors the stream captured
      impl.check();
      return;
    }
    if (failure) {
      if (drain.expired()) {
        GNIO_WARN(Init,
                  "rank %d: the stream still runs work %.0f s after the communicator failed (a "
                  "kernel spinning outside gnio's waits?); what that work uses must stay allocated",
                  impl.bootstrap->rank(), kDrainAfterFailure_s);
        std::rethrow_exception(failure);
      }
    } else {
      try {
        impl.check();
      } catch (const std::exception&) {
        failure = std::current_exception();
        drain = Deadline::after(kDrainAfterFailure_s);
      }
      if (!failure && deadline.expired())
        fail(ErrorClass::Timeout,
             "rank %d: the stream did not finish within %.0f s and no gnio wait reported a "
             "stall; a kernel may be spinning outside gnio's bounded waits",
             impl.bootstrap->rank(), limit);
    }
  }
}

}  // namespace

void Comm::check() const {
  impl_->record(detail::host_op(detail::FlightEvent::Check));
  dumping_failures(*impl_, [&] { impl_->check(); });
}

void Comm::synchronize(StreamRef stream) const {
  detail::FlightEntry e = detail::host_op(detail::FlightEvent::Synchronize);
  e.stream = stream.is_host() ? reinterpret_cast<std::uintptr_t>(stream.host())
                              : reinterpret_cast<std::uintptr_t>(stream.cuda());
  impl_->record(e);
  dumping_failures(*impl_, [&] { synchronize_stream(*impl_, stream); });
}

void Comm::abort() noexcept {
  impl_->aborted.store(true);
  dev::atomic_store(&impl_->control->abort, kAbortByHost, dev::Order::Release);
  impl_->record(detail::host_op(detail::FlightEvent::Abort));
  impl_->dump_flight(detail::FlightDump::Abort, "Comm::abort() was called");
}

bool Comm::aborted() const noexcept {
  return impl_->aborted.load() || control_stopped(*impl_->control, dev::Order::Acquire);
}

}  // namespace gnio
