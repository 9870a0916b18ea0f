// UDP flow counters: a kernel receives every frame on a network interface's queue, counts UDP
// datagrams and bytes per flow (source address and port, destination port) and reports the counts
// to the CPU through a semaphore, a report per item, as GPUNetIO's simple_receive does; the CPU
// adds the reports up and prints each flow's totals at the end.
//
//   gnio-run -n 1 -- udp_flows INTERFACE [--queue Q] [--seconds S] [--count N] [--hold-ms T]
//   [--skb] [--packet]
//
// Runs until N datagrams were reported or S seconds passed (default 10). Frames that are not UDP
// over IPv4 are counted apart. --skb: generic XDP; --packet: AF_PACKET instead of AF_XDP (the
// Linux stack then sees the datagrams too); --hold-ms: the kernel leaves the queue alone that
// long first, so a burst overflows the rings (the port counts the drops). Needs CAP_NET_ADMIN and
// CAP_NET_RAW (root) and libxdp.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"
#include "gnio/device/packet.hpp"
#include "gnio/eth.hpp"
#include "gnio/launch.hpp"
#include "gnio/semaphore.hpp"

namespace {

constexpr unsigned kFlows = 16;  // flows one report holds; more go into the next report
constexpr unsigned kItems = 32;  // reports in flight

struct Flow {
  std::uint32_t src_ip;
  std::uint16_t src_port, dst_port;
  std::uint64_t packets, bytes;
};

/// One report: the counts since the previous one.
struct Report {
  std::uint32_t flows;
  std::uint32_t other_frames;
  Flow flow[kFlows];
};

struct FlowKernel {
  gnio::eth::RxQueue rx;
  gnio::SemaphoreView reports;
  unsigned report_every;  // datagrams per report (at most; an idle queue reports what it has)
  std::uint64_t hold_ns;  // how long to leave the queue alone first (shows what overflow does)
  GNIO_HD_INLINE void operator()() const {
    constexpr unsigned kBatch = 32;
    gnio::eth::Packet p[kBatch];
    Report r{};
    std::uint32_t next = 0, counted = 0;
    // Hands `r` to the CPU in the next item (waiting up to 1 s for it to be Free), then clears it.
    auto post = [&]() {
      if (r.flows == 0 && r.other_frames == 0) return true;
      if (!reports.wait(next, gnio::ItemStatus::Free, 1000000000ull)) return false;
      *reports.info_of<Report>(next) = r;
      reports.set(next, gnio::ItemStatus::Ready);
      ++next;
      r = Report{};
      counted = 0;
      return true;
    };
    const std::uint64_t start = gnio::dev::now_ns();
    for (std::uint32_t spin = 0; gnio::dev::now_ns() - start < hold_ns && !rx.stopped(); ++spin)
      gnio::dev::poll_pause(spin);
    while (!rx.stopped()) {
      const unsigned n = gnio::eth::receive(rx, p, kBatch, 1000000);  // 1 ms
      for (unsigned i = 0; i < n; ++i) {
        const gnio::packet::UdpView u = gnio::packet::parse_udp(p[i].data, p[i].length);
        if (!u.ok) {
          ++r.other_frames;
          continue;
        }
        unsigned f = 0;
        while (f < r.flows && !(r.flow[f].src_ip == u.src_ip && r.flow[f].src_port == u.src_port &&
                                r.flow[f].dst_port == u.dst_port))
          ++f;
        if (f == kFlows) {  // the report is full of other flows: send it, start the next
          if (!post()) return;
          f = 0;
        }
        if (f == r.flows) r.flow[r.flows++] = Flow{u.src_ip, u.src_port, u.dst_port, 0, 0};
        ++r.flow[f].packets;
        r.flow[f].bytes += u.payload_bytes;
        ++counted;
      }
      gnio::eth::release(rx, n);
      if ((counted >= report_every || n == 0) && !post()) return;
    }
    (void)post();
  }
};

using FlowKey = std::tuple<std::uint32_t, std::uint16_t, std::uint16_t>;

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: %s INTERFACE [--queue Q] [--seconds S] [--count N] [--hold-ms T] [--skb] "
                 "[--packet]\n",
                 argv[0]);
    return 2;
  }
  gnio::eth::PortOptions options;
  options.interface = argv[1];
  double seconds = 10;
  unsigned long long count = 0;
  double hold_ms = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--queue" && v)
      options.queue = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--seconds" && v)
      seconds = std::atof(argv[++i]);
    else if (a == "--count" && v)
      count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--hold-ms" && v)
      hold_ms = std::atof(argv[++i]);
    else if (a == "--skb")
      options.mode = gnio::eth::XdpMode::Skb;
    else if (a == "--packet")
      options.socket = gnio::eth::SocketKind::Packet;
    else {
      std::fprintf(stderr, "udp_flows: unknown or incomplete argument '%s'\n", a.c_str());
      return 2;
    }
  }
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::Port port(comm, options);
  gnio::Semaphore sem(comm, kItems, sizeof(Report));
  const gnio::SemaphoreView reports = sem.device_handle();
  std::printf("udp_flows: %s queue %u: %s\n", options.interface.c_str(), options.queue,
              port.mode().c_str());
  std::fflush(stdout);
  gnio::launch(stream, {.grid = 1, .block = 1},
               FlowKernel{port.rx(), reports, 256, static_cast<std::uint64_t>(hold_ms * 1e6)});

  std::map<FlowKey, std::pair<unsigned long long, unsigned long long>> totals;
  unsigned long long datagrams = 0, other = 0, items = 0;
  std::uint32_t next = 0;
  auto take = [&](std::uint64_t timeout_ns) {
    if (!reports.wait(next, gnio::ItemStatus::Ready, timeout_ns)) return false;
    const Report& r = *reports.info_of<Report>(next);
    for (std::uint32_t f = 0; f < r.flows && f < kFlows; ++f) {
      auto& t = totals[FlowKey{r.flow[f].src_ip, r.flow[f].src_port, r.flow[f].dst_port}];
      t.first += r.flow[f].packets;
      t.second += r.flow[f].bytes;
      datagrams += r.flow[f].packets;
    }
    other += r.other_frames;
    reports.set(next++, gnio::ItemStatus::Free);
    ++items;
    return true;
  };
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds &&
         (count == 0 || datagrams < count))
    (void)take(10000000);  // 10 ms
  port.stop();
  // The kernel posts what it still holds as it ends; take it (it waits for Free items).
  std::thread drain([&] {
    while (take(200000000)) {
    }
  });
  comm.synchronize(stream);
  drain.join();
  for (const auto& [key, t] : totals) {
    in_addr a{htonl(std::get<0>(key))};
    std::printf("udp_flows: flow %s:%u -> port %u: %llu datagrams, %llu payload bytes\n",
                inet_ntoa(a), std::get<1>(key), std::get<2>(key), t.first, t.second);
  }
  std::printf("udp_flows: %llu datagrams in %zu flows, %llu other frames, %llu reports\n",
              datagrams, totals.size(), other, items);
  const gnio::eth::PortStats st = port.stats();
  std::printf(
      "udp_flows: port: %llu frames received, %llu dropped (RX ring full %llu, other "
      "%llu), fill ring found empty %llu times\n",
      static_cast<unsigned long long>(st.received),
      static_cast<unsigned long long>(st.rx_ring_full + st.rx_dropped),
      static_cast<unsigned long long>(st.rx_ring_full),
      static_cast<unsigned long long>(st.rx_dropped),
      static_cast<unsigned long long>(st.rx_fill_empty));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "udp_flows: %s\n", e.what());
    return 1;
  }
}
