// ICMP echo responder: a kernel answers pings arriving on a network interface's queue, building
// each reply itself in the port's packet memory, with the IP TTL set to a marker (default 42) so
// that `ping` shows the reply came from here and not from the Linux stack (which uses 64). The
// CPU only wakes the socket to transmit. Everything else arriving on the queue is counted and
// dropped; while the port is open the Linux stack sees none of that queue's packets.
//
//   gnio-run -n 1 -- icmp_echo INTERFACE [--queue Q] [--seconds S] [--count N] [--ttl T] [--skb]
//   [--packet]
//
// Runs until N echo requests were answered or S seconds passed (default 10), then prints what it
// counted. Needs CAP_NET_ADMIN and CAP_NET_RAW (root) and libxdp.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"
#include "gnio/device/packet.hpp"
#include "gnio/eth.hpp"
#include "gnio/launch.hpp"

namespace {

/// What the kernel counted (device memory, read back at the end).
struct Counts {
  unsigned long long replies;
  unsigned long long not_ipv4;
  unsigned long long not_echo;
  unsigned long long bad_checksum;
  unsigned long long no_tx_frame;
};

struct EchoKernel {
  gnio::eth::RxQueue rx;
  gnio::eth::TxQueue tx;
  Counts* counts;
  std::uint8_t ttl;
  GNIO_HD_INLINE void operator()() const {
    constexpr unsigned kBatch = 32;
    gnio::eth::Packet p[kBatch];
    Counts c{};
    while (!rx.stopped()) {
      const unsigned n = gnio::eth::receive(rx, p, kBatch, 2000000);  // 2 ms, then look at stop
      for (unsigned i = 0; i < n; ++i) {
        gnio::eth::TxFrame f;
        if (!gnio::eth::acquire(tx, &f, 100000000)) {  // Linux sends nothing for 100 ms
          ++c.no_tx_frame;
          continue;
        }
        unsigned length = 0;
        switch (gnio::packet::make_echo_reply(p[i].data, p[i].length, f.data, ttl, &length)) {
          case gnio::packet::EchoVerdict::Reply:
            gnio::eth::send(tx, f, length);
            ++c.replies;
            break;
          case gnio::packet::EchoVerdict::NotIpv4: ++c.not_ipv4; break;
          case gnio::packet::EchoVerdict::NotEchoRequest: ++c.not_echo; break;
          case gnio::packet::EchoVerdict::BadChecksum: ++c.bad_checksum; break;
        }
      }
      gnio::eth::release(rx, n);
    }
    *counts = c;
  }
};

}  // namespace

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(
        stderr,
        "usage: %s INTERFACE [--queue Q] [--seconds S] [--count N] [--ttl T] [--skb] [--packet]\n",
        argv[0]);
    return 2;
  }
  gnio::eth::PortOptions options;
  options.interface = argv[1];
  double seconds = 10;
  unsigned long long count = 0;
  int ttl = 42;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--queue" && v)
      options.queue = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--seconds" && v)
      seconds = std::atof(argv[++i]);
    else if (a == "--count" && v)
      count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ttl" && v)
      ttl = std::atoi(argv[++i]);
    else if (a == "--skb")
      options.mode = gnio::eth::XdpMode::Skb;
    else if (a == "--packet")
      options.socket = gnio::eth::SocketKind::Packet;
    else {
      std::fprintf(stderr, "icmp_echo: unknown or incomplete argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (ttl < 1 || ttl > 255) {
    std::fprintf(stderr, "icmp_echo: --ttl %d is not within 1..255\n", ttl);
    return 2;
  }
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::Port port(comm, options);
  std::printf("icmp_echo: %s queue %u: %s\n", options.interface.c_str(), options.queue,
              port.mode().c_str());
  std::fflush(stdout);
  auto* counts = static_cast<Counts*>(comm.alloc_device(sizeof(Counts)));
  gnio::launch(stream, {.grid = 1, .block = 1},
               EchoKernel{port.rx(), port.tx(), counts, static_cast<std::uint8_t>(ttl)});
  const auto start = std::chrono::steady_clock::now();
  // The port counts what the kernel took from the RX ring; requests and replies are one each.
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds &&
         (count == 0 || port.stats().sent < count))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  port.stop();
  comm.synchronize(stream);
  Counts c{};
  comm.copy(&c, counts, sizeof(c), stream);
  comm.synchronize(stream);
  comm.free_device(counts);
  const gnio::eth::PortStats s = port.stats();
  std::printf(
      "icmp_echo: %llu replies (ttl %d); dropped: %llu not IPv4, %llu not echo requests, %llu bad "
      "checksums, %llu without a TX frame; port: %llu received, %llu sent, %llu RX ring full, "
      "%llu fill ring empty, %llu invalid, %llu wakeups\n",
      c.replies, ttl, c.not_ipv4, c.not_echo, c.bad_checksum, c.no_tx_frame,
      static_cast<unsigned long long>(s.received), static_cast<unsigned long long>(s.sent),
      static_cast<unsigned long long>(s.rx_ring_full),
      static_cast<unsigned long long>(s.rx_fill_empty),
      static_cast<unsigned long long>(s.rx_invalid + s.tx_invalid),
      static_cast<unsigned long long>(s.wakeups));
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icmp_echo: %s\n", e.what());
    return 1;
  }
}
