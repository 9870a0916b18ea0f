// UDP echo: a kernel sends every UDP datagram that arrives for one port (default 7, the echo
// service) back to its sender with the same payload, built in the port's packet memory. Anything
// else on the queue is counted and dropped.
//
//   gnio-run -n 1 -- udp_echo INTERFACE [--port P] [--queue Q] [--seconds S] [--count N] [--skb]
//   [--packet]
//
// Runs until N datagrams were echoed or S seconds passed (default 10). Needs CAP_NET_ADMIN and
// CAP_NET_RAW (root) and libxdp.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"
#include "gnio/device/packet.hpp"
#include "gnio/eth.hpp"
#include "gnio/launch.hpp"

namespace {

struct Counts {
  unsigned long long echoed, other_port, not_udp, no_tx_frame;
};

struct EchoKernel {
  gnio::eth::RxQueue rx;
  gnio::eth::TxQueue tx;
  std::uint16_t port;
  Counts* counts;
  GNIO_HD_INLINE void operator()() const {
    constexpr unsigned kBatch = 32;
    gnio::eth::Packet p[kBatch];
    Counts c{};
    while (!rx.stopped()) {
      const unsigned n = gnio::eth::receive(rx, p, kBatch, 2000000);
      for (unsigned i = 0; i < n; ++i) {
        const gnio::packet::UdpView u = gnio::packet::parse_udp(p[i].data, p[i].length);
        if (!u.ok) {
          ++c.not_udp;
          continue;
        }
        if (u.dst_port != port) {
          ++c.other_port;
          continue;
        }
        gnio::eth::TxFrame f;
        if (!gnio::eth::acquire(tx, &f, 100000000)) {
          ++c.no_tx_frame;
          continue;
        }
        gnio::eth::send(tx, f, gnio::packet::make_udp_echo(p[i].data, u, f.data));
        ++c.echoed;
      }
      gnio::eth::release(rx, n);
    }
    *counts = c;
  }
};

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(
        stderr,
        "usage: %s INTERFACE [--port P] [--queue Q] [--seconds S] [--count N] [--skb] [--packet]\n",
        argv[0]);
    return 2;
  }
  gnio::eth::PortOptions options;
  options.interface = argv[1];
  double seconds = 10;
  unsigned long long count = 0;
  int port = 7;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--port" && v)
      port = std::atoi(argv[++i]);
    else if (a == "--queue" && v)
      options.queue = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--seconds" && v)
      seconds = std::atof(argv[++i]);
    else if (a == "--count" && v)
      count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--skb")
      options.mode = gnio::eth::XdpMode::Skb;
    else if (a == "--packet")
      options.socket = gnio::eth::SocketKind::Packet;
    else {
      std::fprintf(stderr, "udp_echo: unknown or incomplete argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (port < 1 || port > 65535) {
    std::fprintf(stderr, "udp_echo: --port %d is not within 1..65535\n", port);
    return 2;
  }
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::Port eth(comm, options);
  std::printf("udp_echo: %s queue %u: %s\n", options.interface.c_str(), options.queue,
              eth.mode().c_str());
  std::fflush(stdout);
  auto* counts = static_cast<Counts*>(comm.alloc_device(sizeof(Counts)));
  gnio::launch(stream, {.grid = 1, .block = 1},
               EchoKernel{eth.rx(), eth.tx(), static_cast<std::uint16_t>(port), counts});
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds &&
         (count == 0 || eth.stats().sent < count))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  eth.stop();
  comm.synchronize(stream);
  Counts c{};
  comm.copy(&c, counts, sizeof(c), stream);
  comm.synchronize(stream);
  comm.free_device(counts);
  std::printf(
      "udp_echo: %llu datagrams echoed on port %d; dropped: %llu for other ports, %llu not "
      "UDP, %llu without a TX frame\n",
      c.echoed, port, c.other_port, c.not_udp, c.no_tx_frame);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "udp_echo: %s\n", e.what());
    return 1;
  }
}
