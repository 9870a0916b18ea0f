// One rank of a peer-failure scenario, run under gnio-run by liveness_test:
//
//   liveness_probe SCENARIO VICTIM
//
// The victim rank dies (SIGKILL, or SIGSTOP for "stop") while the others are inside the operation
// the scenario names: "wait" (a device wait_signal inside a kernel), "sync" (a device team sync),
// "barrier" (a bootstrap barrier), "alloc" (a collective allocation), "stop" (the victim is
// stopped, not killed: only the missing heartbeats tell), "rma" (every rank, the victim
// included, runs a kernel passing put_signals around the ring; the victim dies with its kernel
// mid-stream), and, when built with collectives, "allreduce" (the victim never joins a host
// allreduce) and "allreduce_running" (every rank streams allreduces; the victim dies with
// its calls in flight), and "first_use" (nobody has used the victim; after its death every
// survivor's kernel put_signals to it, the first use of that peer, whose connection (opened on
// first use) cannot be made). Each survivor prints one line
//
//   LIVENESS rank=R class=C detect_s=T teardown_s=D status=S failed_rank=F progress=P later=L
//
// with the error class it got, how long after the victim's death it came, how long the Comm's
// teardown took, the device status and failed_rank() the kernel saw ("-" when none ran), how
// much work completed before the failure in the scenarios that stream it (ring rounds or
// allreduces; "-" in the others), and whether every later call threw RemoteError (L=1); the
// driver checks them. "orderly" kills
// nobody: every rank prints "LIVENESS rank=R orderly ok=1" when it saw no failure.
//
// Survivors ignore SIGTERM: gnio-run stops the job when the victim dies, and the survivors must
// still report (they exit on their own within the grace period).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"
#include "gnio/stream.hpp"
#ifdef GNIO_LIVENESS_COLL
#include "gnio/coll.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How long the victim waits after the last common step before it dies, so the survivors are
// already inside the operation.
constexpr double kVictimDelay_s = 0.5;

/// Bytes each put of the "rma" scenario carries.
constexpr std::size_t kRmaBytes = 4096;

/// Elements of the allreduces of the "allreduce" scenarios.
constexpr std::size_t kAllreduceCount = 1 << 16;

/// The "rma" scenario's kernel: put_signals around the ring until a wait fails (the victim's
/// death ends it; GNIO_TIMEOUT bounds it otherwise). Writes the failing status, failed_rank() and
/// the rounds completed.
struct RingOfPutSignals {
  gnio::DeviceComm dc;
  gnio::SymPtr<char> data;
  gnio::SymPtr<std::uint64_t> arrived;
  std::uint32_t* result;
  GNIO_HD void operator()() const {
    const int next = (dc.rank() + 1) % dc.size();
    gnio::Status st = gnio::Status::Ok;
    std::uint32_t rounds = 0;
    for (; st == gnio::Status::Ok; ++rounds) {
      dc.put_signal(data + kRmaBytes, dc.local(data), kRmaBytes, arrived, 1, gnio::SignalOp::Add,
                    next);
      st = dc.wait_signal(arrived, gnio::Cmp::Ge, rounds + 1);
    }
    result[0] = static_cast<std::uint32_t>(st);
    result[1] = static_cast<std::uint32_t>(dc.failed_rank());
    result[2] = rounds - 1;
  }
};

// Every call after the loss must throw RemoteError.
bool later_calls_fail(gnio::Comm& c) {
  int failed = 0;
  auto expect = [&](auto&& call) {
    try {
      call();
    } catch (const gnio::Error& e) {
      if (e.error_class() == gnio::ErrorClass::RemoteError) ++failed;
      return;
    }
  };
  expect([&] { c.check(); });
  expect([&] { (void)c.alloc<char>(4096); });
  expect([&] { c.bootstrap().barrier(); });
  return failed == 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: liveness_probe SCENARIO VICTIM\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int victim = std::atoi(argv[2]);
  const bool orderly = scenario == "orderly";
  int rank = -1;
  try {
    auto comm = std::make_unique<gnio::Comm>(gnio::Comm::from_env());
    gnio::Comm& c = *comm;
    rank = c.rank();
    const bool dies = !orderly && rank == victim;
    if (!dies) ::signal(SIGTERM, SIG_IGN);
    auto stream = std::make_unique<gnio::Stream>(c);
    // Pids, so a survivor can end a stopped victim after it was reported.
    std::vector<int> pids(c.size());
    pids[rank] = static_cast<int>(::getpid());
    c.bootstrap().allgather(pids.data(), sizeof(int));
    gnio::SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(2);  // [0] never set, [1] "rma"
    gnio::SymPtr<char> rma_data = c.alloc<char>(2 * kRmaBytes);
    // The kernel's status, failed_rank() and progress.
    auto* result = static_cast<std::uint32_t*>(c.alloc_device(3 * sizeof(std::uint32_t)));
    const std::uint32_t init[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    const std::uint64_t zero[2] = {0, 0};
    c.copy(c.local(sig), zero, sizeof(zero), *stream);
    c.copy(result, init, sizeof(init), *stream);
    c.synchronize(*stream);
    // "first_use": no rank may have reached the victim before it dies (the allreduce below would).
    const bool touch_all = scenario != "first_use";
#ifdef GNIO_LIVENESS_COLL
    const std::size_t count = kAllreduceCount;
    auto* send = static_cast<float*>(c.alloc_device(count * sizeof(float)));
    auto* recv = static_cast<float*>(c.alloc_device(count * sizeof(float)));
    std::vector<float> ones(count, static_cast<float>(rank + 1));
    c.copy(send, ones.data(), count * sizeof(float), *stream);
    if (touch_all) {
      gnio::allreduce(c, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, *stream);
      c.synchronize(*stream);
    }
#endif
    c.bootstrap().barrier();

    if (orderly) {
      // Ranks idle for different times (many heartbeats each), then leave one after another.
      gnio::DeviceComm dc = c.device_handle();
      gnio::launch(*stream, {.grid = 1, .block = 1}, [=] GNIO_HD() { (void)dc.sync(dc.world()); });
      c.synchronize(*stream);
      std::this_thread::sleep_for(std::chrono::milliseconds(300 * (rank + 1)));
      c.check();
      bool ok = !c.aborted();
      stream.reset();
      comm.reset();
      std::printf("LIVENESS rank=%d orderly ok=%d\n", rank, ok ? 1 : 0);
      return ok ? 0 : 1;
    }

    gnio::DeviceComm dc = c.device_handle();
    if (dies) {
      // Scenarios in which the victim dies with its own work in flight start that work first.
      if (scenario == "rma") {
        gnio::launch(*stream, {.grid = 1, .block = 1},
                     RingOfPutSignals{dc, rma_data, sig + 1, result});
        std::this_thread::sleep_for(std::chrono::duration<double>(kVictimDelay_s));
#ifdef GNIO_LIVENESS_COLL
      } else if (scenario == "allreduce_running") {
        const Clock::time_point begin = Clock::now();
        while (since(begin) < kVictimDelay_s) {
          gnio::allreduce(c, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, *stream);
          c.synchronize(*stream);
        }
        for (int i = 0; i < 8; ++i)
          gnio::allreduce(c, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, *stream);
#endif
      } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(kVictimDelay_s));
      }
      std::fflush(nullptr);
      ::raise(scenario == "stop" ? SIGSTOP : SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(600));  // a stopped victim never gets here
      return 3;
    }

    const Clock::time_point start = Clock::now();
    std::string cls = "none", message;
    bool kernel = false;
    long progress = -1;  // completed allreduces ("allreduce_running")
    try {
      if (scenario == "wait" || scenario == "stop") {
        kernel = true;
        gnio::launch(*stream, {.grid = 1, .block = 1}, [=] GNIO_HD() {
          result[0] = static_cast<std::uint32_t>(dc.wait_signal(sig, gnio::Cmp::Ge, 1));
          result[1] = static_cast<std::uint32_t>(dc.failed_rank());
        });
        c.synchronize(*stream);
      } else if (scenario == "sync") {
        kernel = true;
        gnio::launch(*stream, {.grid = 1, .block = 1}, [=] GNIO_HD() {
          result[0] = static_cast<std::uint32_t>(dc.sync(dc.world()));
          result[1] = static_cast<std::uint32_t>(dc.failed_rank());
        });
        c.synchronize(*stream);
      } else if (scenario == "rma") {
        kernel = true;
        gnio::launch(*stream, {.grid = 1, .block = 1},
                     RingOfPutSignals{dc, rma_data, sig + 1, result});
        c.synchronize(*stream);
      } else if (scenario == "first_use") {
        kernel = true;
        // Past the victim's death, then its first use: the put_signal's connection is refused,
        // and the wait for a signal nobody sends ends with that failure.
        std::this_thread::sleep_for(std::chrono::duration<double>(kVictimDelay_s + 0.5));
        gnio::launch(*stream, {.grid = 1, .block = 1}, [=] GNIO_HD() {
          dc.put_signal(rma_data + kRmaBytes, dc.local(rma_data), kRmaBytes, sig + 1, 1,
                        gnio::SignalOp::Add, victim);
          result[0] = static_cast<std::uint32_t>(dc.wait_signal(sig, gnio::Cmp::Ge, 1));
          result[1] = static_cast<std::uint32_t>(dc.failed_rank());
        });
        c.synchronize(*stream);
      } else if (scenario == "barrier") {
        c.bootstrap().barrier();
      } else if (scenario == "alloc") {
        (void)c.alloc<char>(1 << 20);
#ifdef GNIO_LIVENESS_COLL
      } else if (scenario == "allreduce") {
        // The victim never joins: the survivors' kernels wait for its data.
        gnio::allreduce(c, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, *stream);
        c.synchronize(*stream);
      } else if (scenario == "allreduce_running") {
        // Until the victim's death stops them (bounded: the loop gives up after a minute).
        const Clock::time_point begin = Clock::now();
        for (progress = 0; since(begin) < 60; ++progress) {
          gnio::allreduce(c, send, recv, count, gnio::DataType::F32, gnio::RedOp::Sum, *stream);
          c.synchronize(*stream);
        }
#endif
      } else {
        std::fprintf(stderr, "liveness_probe: unknown scenario '%s'\n", scenario.c_str());
        return 2;
      }
    } catch (const gnio::Error& e) {
      cls = std::string(gnio::to_string(e.error_class()));
      message = e.what();
    }
    const double detect = since(start) - kVictimDelay_s;
    // The kernel ends once its wait saw the abort word; its results are then readable.
    stream->synchronize();
    std::uint32_t seen[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    if (kernel) {
      c.copy(seen, result, sizeof(seen), *stream);
      stream->synchronize();
    }
    if (scenario == "stop" && rank == (victim == 0 ? 1 : 0)) ::kill(pids[victim], SIGKILL);
    // A bootstrap call can see the victim's connection close a moment before the liveness
    // watcher's verdict arrives (from rank 0); from then on every call must fail.
    const Clock::time_point settle = Clock::now();
    while (!c.aborted() && since(settle) < 3)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool later = later_calls_fail(c);
    const Clock::time_point teardown = Clock::now();
    stream.reset();
    comm.reset();
    std::string status = kernel ? std::to_string(seen[0]) : "-";
    std::string failed = kernel ? std::to_string(static_cast<int>(seen[1])) : "-";
    if (scenario == "rma") progress = seen[2];
    const std::string done = progress >= 0 ? std::to_string(progress) : "-";
    std::printf(
        "LIVENESS rank=%d class=%s detect_s=%.3f teardown_s=%.3f status=%s failed_rank=%s "
        "progress=%s later=%d message=%s\n",
        rank, cls.c_str(), detect, since(teardown), status.c_str(), failed.c_str(), done.c_str(),
        later ? 1 : 0, message.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "liveness_probe: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
