// Timed send bursts: a kernel sends B bursts of K UDP datagrams, one burst every I microseconds
// by its own clock (gnio::eth::send_at), as GPUNetIO's send_wait_time does. Each datagram carries
// its burst and sequence numbers so the receiver can check grouping and spacing. Prints how late
// the kernel was against the schedule.
//
//   gnio-run -n 1 -- send_bursts INTERFACE --dst-mac M --src IP --dst IP [--port P]
//                    [--bursts B] [--burst K] [--interval-us I] [--size BYTES] [--skb] [--packet]
//
// Defaults: port 9, 50 bursts of 8, every 1000 us, 64-byte frames. Needs CAP_NET_ADMIN and
// CAP_NET_RAW (root) and libxdp.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"
#include "gnio/device/packet.hpp"
#include "gnio/eth.hpp"
#include "gnio/launch.hpp"

namespace {

struct Result {
  unsigned long long sent, late_sum_ns, late_max_ns;
};

struct BurstKernel {
  gnio::eth::TxQueue tx;
  const std::uint8_t* frame;  // the datagram to send, payload bytes 0..7 rewritten per send
  unsigned size, bursts, burst;
  std::uint64_t interval_ns;
  Result* result;
  GNIO_HD_INLINE void operator()() const {
    Result r{};
    const std::uint64_t start = gnio::dev::now_ns() + 1000000;  // 1 ms from now
    for (unsigned b = 0; b < bursts && !tx.stopped(); ++b) {
      const std::uint64_t when = start + b * interval_ns;
      for (unsigned k = 0; k < burst; ++k) {
        gnio::eth::TxFrame f;
        if (!gnio::eth::acquire(tx, &f, 1000000000ull)) {
          *result = r;
          return;
        }
        for (unsigned i = 0; i < size; ++i) f.data[i] = frame[i];
        std::uint8_t* payload = f.data + 42;
        gnio::packet::store16(payload, static_cast<std::uint16_t>(b >> 16));
        gnio::packet::store16(payload + 2, static_cast<std::uint16_t>(b));
        gnio::packet::store16(payload + 4, 0);
        gnio::packet::store16(payload + 6, static_cast<std::uint16_t>(k));
        if (k == 0) {
          gnio::eth::send_at(tx, f, size, when);
          const std::uint64_t late = gnio::dev::now_ns() - when;
          r.late_sum_ns += late;
          if (late > r.late_max_ns) r.late_max_ns = late;
        } else {
          gnio::eth::send(tx, f, size);
        }
        ++r.sent;
      }
    }
    *result = r;
  }
};

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: %s INTERFACE --dst-mac M --src IP --dst IP [--port P] [--bursts B] "
                 "[--burst K] [--interval-us I] [--size BYTES] [--skb] [--packet]\n",
                 argv[0]);
    return 2;
  }
  gnio::eth::PortOptions options;
  options.interface = argv[1];
  std::string mac, src, dst;
  unsigned port = 9, bursts = 50, burst = 8, size = 64;
  double interval_us = 1000;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--dst-mac" && v)
      mac = argv[++i];
    else if (a == "--src" && v)
      src = argv[++i];
    else if (a == "--dst" && v)
      dst = argv[++i];
    else if (a == "--port" && v)
      port = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--bursts" && v)
      bursts = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--burst" && v)
      burst = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--interval-us" && v)
      interval_us = std::atof(argv[++i]);
    else if (a == "--size" && v)
      size = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--skb")
      options.mode = gnio::eth::XdpMode::Skb;
    else if (a == "--packet")
      options.socket = gnio::eth::SocketKind::Packet;
    else {
      std::fprintf(stderr, "send_bursts: unknown or incomplete argument '%s'\n", a.c_str());
      return 2;
    }
  }
  unsigned m[6];
  in_addr probe{};
  if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) !=
          6 ||
      inet_pton(AF_INET, src.c_str(), &probe) != 1 ||
      inet_pton(AF_INET, dst.c_str(), &probe) != 1 || size < 64 || size > 1514 || burst < 1 ||
      bursts < 1 || interval_us <= 0 || port < 1 || port > 65535) {
    std::fprintf(stderr,
                 "send_bursts: need --dst-mac, --src and --dst; --size 64..1514, --burst and "
                 "--bursts >= 1, --interval-us > 0, --port 1..65535\n");
    return 2;
  }
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::Port eth(comm, options);
  std::printf("send_bursts: %s queue %u: %s\n", options.interface.c_str(), options.queue,
              eth.mode().c_str());
  std::fflush(stdout);
  std::vector<std::uint8_t> f(size, 0);
  std::uint8_t dst_mac[6];
  for (int i = 0; i < 6; ++i) dst_mac[i] = static_cast<std::uint8_t>(m[i]);
  in_addr src_ip{}, dst_ip{};
  inet_pton(AF_INET, src.c_str(), &src_ip);
  inet_pton(AF_INET, dst.c_str(), &dst_ip);
  gnio::packet::write_udp_headers(f.data(), dst_mac, eth.mac(), ntohl(src_ip.s_addr),
                                  ntohl(dst_ip.s_addr), 4000, static_cast<std::uint16_t>(port),
                                  size - 42);
  auto* frame = static_cast<std::uint8_t*>(comm.alloc_device(f.size()));
  auto* result = static_cast<Result*>(comm.alloc_device(sizeof(Result)));
  comm.copy(frame, f.data(), f.size(), stream);
  gnio::launch(stream, {.grid = 1, .block = 1},
               BurstKernel{eth.tx(), frame, size, bursts, burst,
                           static_cast<std::uint64_t>(interval_us * 1000), result});
  comm.synchronize(stream);
  Result r{};
  comm.copy(&r, result, sizeof(r), stream);
  comm.synchronize(stream);
  // The last frames leave when the port's thread wakes the socket: wait for Linux to finish.
  const auto t0 = std::chrono::steady_clock::now();
  while (eth.stats().sent < r.sent &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::printf(
      "send_bursts: %llu datagrams in %u bursts of %u every %.0f us (%llu completed); "
      "burst starts late by %.1f us on average, %.1f us at most\n",
      r.sent, bursts, burst, interval_us, static_cast<unsigned long long>(eth.stats().sent),
      bursts ? r.late_sum_ns / 1e3 / bursts : 0.0, r.late_max_ns / 1e3);
  comm.free_device(result);
  comm.free_device(frame);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "send_bursts: %s\n", e.what());
    return 1;
  }
}
