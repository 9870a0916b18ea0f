// One rank of the flight-recorder scenario, run under gnio-run by flight_test:
//
//   flight_probe SKIPPER
//
// Every rank runs checked allreduces on one stream (and a collective allocation in between);
// rank SKIPPER leaves out allreduce number kSkipped. The others then time out in it (short
// GNIO_TIMEOUT), which writes their flight-recorder dumps, print a line and die without saying
// goodbye, as a job whose ranks crash on an error does. The skipper waits in Comm::check() until
// its liveness watcher reports them lost, which writes its own dump. Each rank prints
//
//   FLIGHT rank=R class=C
//
// with the error class it got; flight_test then runs gnio-flight on the dumps.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/stream.hpp"

namespace {

constexpr int kCalls = 6;
constexpr int kSkipped = 4;  // 1-based

[[noreturn]] void report(int rank, const char* cls) {
  std::printf("FLIGHT rank=%d class=%s\n", rank, cls);
  std::fflush(nullptr);
  // Without the Comm's orderly teardown: the peers must see this rank die.
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int skipper = std::atoi(argv[1]);
  // gnio-run stops the job when the first rank ends; every rank must still write its dump.
  ::signal(SIGTERM, SIG_IGN);
  gnio::Comm c = gnio::Comm::from_env();
  const int rank = c.rank(), n = c.size();
  gnio::Stream stream(c);
  const std::size_t count = 1000;
  auto* send = static_cast<std::int32_t*>(c.alloc_device(count * sizeof(std::int32_t)));
  auto* recv = static_cast<std::int32_t*>(c.alloc_device(count * sizeof(std::int32_t)));
  std::vector<std::int32_t> in(count), out(count);
  for (int call = 1; call <= kCalls; ++call) {
    if (call == 2) (void)c.alloc<char>(4096);  // a host-stream entry
    if (rank == skipper && call == kSkipped) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < end) {
        try {
          c.check();
        } catch (const gnio::Error& e) {
          report(rank, std::string(gnio::to_string(e.error_class())).c_str());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      report(rank, "none");
    }
    for (std::size_t i = 0; i < count; ++i)
      in[i] = static_cast<std::int32_t>(i * 7 + rank * 1000 + call);
    c.copy(send, in.data(), count * sizeof(std::int32_t), stream);
    gnio::allreduce(c, send, recv, count, gnio::DataType::I32, gnio::RedOp::Sum, stream);
    c.copy(out.data(), recv, count * sizeof(std::int32_t), stream);
    try {
      c.synchronize(stream);
    } catch (const gnio::Error& e) {
      report(rank, std::string(gnio::to_string(e.error_class())).c_str());
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t want =
          static_cast<std::int64_t>(n) * (i * 7 + call) + 1000LL * n * (n - 1) / 2;
      if (out[i] != want) {
        std::printf("FLIGHT rank=%d bad data at call %d element %zu: %d, want %lld\n", rank, call,
                    i, out[i], static_cast<long long>(want));
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
  }
  report(rank, "none");
}
