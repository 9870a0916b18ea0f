// Ping-pong: rank 0 and rank 1 bounce a counter with put_signal from inside one kernel each,
// without the CPU in the loop. The smallest complete gnio program: create a communicator,
// allocate symmetric memory, launch a kernel that communicates, check the result.
//
//   gnio-run -n 2 ./ping_pong [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
  gnio::Comm comm = gnio::Comm::from_env();
  if (comm.size() < 2) {
    std::fprintf(stderr, "ping_pong needs 2 ranks: gnio-run -n 2 %s\n", argv[0]);
    return 2;
  }
  gnio::Stream stream(comm);
  // The ball (one int) and the signal that says it arrived, at the same offset on every rank.
  gnio::SymPtr<int> ball = comm.alloc<int>(1);
  gnio::SymPtr<std::uint64_t> arrived = comm.alloc<std::uint64_t>(1);
  comm.fill(comm.local(arrived), 0, sizeof(std::uint64_t), stream);
  comm.synchronize(stream);
  comm.bootstrap().barrier();  // every rank's signal is clear before anyone can write it

  gnio::DeviceComm dc = comm.device_handle();
  auto start = std::chrono::steady_clock::now();
  gnio::launch(stream, {.grid = 1, .block = 1}, [=] GNIO_HD() {
    const int me = dc.rank();
    if (me > 1) return;
    const int peer = 1 - me;
    for (int i = 1; i <= iterations; ++i) {
      if (me == 0) {
        dc.put_signal(ball, &i, 1, arrived, static_cast<std::uint64_t>(i), gnio::SignalOp::Set, peer);
        if (dc.wait_signal(arrived, gnio::Cmp::Ge, static_cast<std::uint64_t>(i)) != gnio::Status::Ok) return;
      } else {
        if (dc.wait_signal(arrived, gnio::Cmp::Ge, static_cast<std::uint64_t>(i)) != gnio::Status::Ok) return;
        const int reply = *dc.local(ball) + 1000000;  // prove the data came with the signal
        dc.put_signal(ball, &reply, 1, arrived, static_cast<std::uint64_t>(i), gnio::SignalOp::Set, peer);
      }
    }
  });
  comm.synchronize(stream);  // throws a Timeout naming the stalled wait if the peer never answers
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int last = 0;
  comm.copy(&last, comm.local(ball), sizeof(int), stream);
  comm.synchronize(stream);
  const int expected = comm.rank() == 0 ? iterations + 1000000 : iterations;
  bool ok = comm.rank() > 1 || last == expected;
  if (comm.rank() == 0)
    std::printf("ping_pong: %d round trips on the %s backend, %.2f us per round trip (includes launch), %s\n",
                iterations, gnio::to_string(comm.backend()), seconds * 1e6 / iterations,
                ok ? "data correct" : "DATA WRONG");
  if (!ok) std::fprintf(stderr, "rank %d: last ball %d, expected %d\n", comm.rank(), last, expected);
  return ok ? 0 : 1;
}
