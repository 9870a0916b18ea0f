// gnio-eth-bench: packets per second through an eth::Port, beside the same loop on a CPU thread
// and beside a UDP socket, for bench/run-eth.sh (which makes the namespaces and the veth pair).
//
//   gnio-eth-bench rx --via gnio|cpu IFACE --seconds S          count what arrives on the queue
//   gnio-eth-bench rx --via udp --port P --seconds S            recvmmsg() on a UDP socket
//   gnio-eth-bench tx --via gnio|cpu IFACE --dst-mac M --src IP --dst IP --size B --count N
//   gnio-eth-bench tx --via udp --dst IP --size B (--count N | --seconds S)   sendmmsg()
//
// gnio: the loop runs as a kernel (gnio::launch; GPU or, with GNIO_BACKEND=host, a CPU thread of
// the host backend). cpu: the same ring code called from a plain std::thread. udp: the Linux
// stack. Frames are UDP/IPv4 to port 9 of --size bytes (Ethernet header included, no FCS). Prints
// one line: "<dir> <via> <size> B: <packets> packets in <s> s = <Mpps> Mpps, <Gb/s> Gb/s". Run it
// under gnio-run -n 1 for gnio and cpu (they need a communicator).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device/eth.hpp"
#include "gnio/device/packet.hpp"
#include "gnio/eth.hpp"
#include "gnio/launch.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir, via, iface, dst_mac, src_ip = "10.97.0.1", dst_ip = "10.97.0.2";
  unsigned size = 64, port = 9;
  unsigned long long count = 0;
  double seconds = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "gnio-eth-bench: %s (see the file comment of perf/probes/eth_bench.cpp)\n",
               why);
  std::exit(2);
}

void report(const Args& a, unsigned long long packets, double s) {
  const double mpps = s > 0 ? packets / s / 1e6 : 0;
  std::printf("%s %s %u B: %llu packets in %.3f s = %.3f Mpps, %.2f Gb/s\n", a.dir.c_str(),
              a.via.c_str(), a.size, packets, s, mpps, mpps * 1e6 * a.size * 8 / 1e9);
  std::fflush(stdout);
}

/// A UDP/IPv4 frame of `size` bytes (Ethernet header included) from port 4000 to --port.
std::vector<std::uint8_t> udp_frame(const Args& a, const std::uint8_t* src_mac) {
  std::vector<std::uint8_t> f(a.size);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(i * 7 + 1);
  unsigned m[6];
  std::uint8_t dst_mac[6];
  if (std::sscanf(a.dst_mac.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4],
                  &m[5]) != 6)
    usage("--dst-mac is not a MAC address");
  for (int i = 0; i < 6; ++i) dst_mac[i] = static_cast<std::uint8_t>(m[i]);
  in_addr src{}, dst{};
  if (inet_pton(AF_INET, a.src_ip.c_str(), &src) != 1 ||
      inet_pton(AF_INET, a.dst_ip.c_str(), &dst) != 1)
    usage("--src and --dst must be IPv4 addresses");
  gnio::packet::write_udp_headers(f.data(), dst_mac, src_mac, ntohl(src.s_addr), ntohl(dst.s_addr),
                                  4000, static_cast<std::uint16_t>(a.port), a.size - 42);
  return f;
}

/// The receive loop, as a kernel or on a CPU thread: counts frames until the port stops.
struct RxLoop {
  gnio::eth::RxQueue rx;
  unsigned size;  // only frames of this size count (not the interface's own chatter)
  unsigned long long* packets;
  unsigned long long* first_ns;  // when the first frame was taken
  unsigned long long* last_ns;
  GNIO_HD_INLINE void operator()() const {
    constexpr unsigned kBatch = 64;
    gnio::eth::Packet p[kBatch];
    unsigned long long n = 0, first = 0, last = 0;
    while (!rx.stopped()) {
      const unsigned got = gnio::eth::receive(rx, p, kBatch, 1000000);
      unsigned counted = 0;
      for (unsigned i = 0; i < got; ++i) counted += p[i].length == size;
      if (counted) {
        last = p[0].timestamp_ns;
        if (n == 0) first = last;
        n += counted;
      }
      gnio::eth::release(rx, got);
    }
    *packets = n;
    *first_ns = first;
    *last_ns = last;
  }
};

/// The transmit loop: `count` copies of `frame`, each into a TX frame, taken and queued in
/// batches. In a GPU kernel a warp runs it (the leader takes the frames into `frames`, device
/// memory the warp reads; the warp copies each frame in 16-byte pieces); on a CPU thread one
/// thread.
template <class Coop>
struct TxLoop {
  static constexpr unsigned kBatch = 32;
  gnio::eth::TxQueue tx;
  const std::uint8_t* frame;
  unsigned size;
  unsigned long long count;
  gnio::eth::TxFrame* frames;  // kBatch entries
  unsigned long long* sent;
  GNIO_HD_INLINE void operator()() const {
    const Coop g;
    std::uint32_t lengths[kBatch];
    for (unsigned k = 0; k < kBatch; ++k) lengths[k] = size;
    unsigned long long i = 0;
    while (i < count) {
      const unsigned want = count - i < kBatch ? static_cast<unsigned>(count - i) : kBatch;
      const unsigned n = gnio::eth::acquire(tx, frames, want, 1000000000, g);  // 1 s
      if (n == 0) break;
      for (unsigned k = 0; k < n; ++k) gnio::eth::copy(frames[k].data, frame, size, g);
      gnio::eth::send(tx, frames, lengths, n, g);
      i += n;
    }
    if (g.leader()) *sent = i;
  }
};

/// The CPU thread's loop: the same batches through the plain forms (the <Coop> forms' handoff is
/// device memory with the cuda backend).
struct CpuTxLoop {
  gnio::eth::TxQueue tx;
  const std::uint8_t* frame;
  unsigned size;
  unsigned long long count;
  unsigned long long* sent;
  void operator()() const {
    constexpr unsigned kBatch = TxLoop<gnio::Thread>::kBatch;
    gnio::eth::TxFrame frames[kBatch];
    std::uint32_t lengths[kBatch];
    for (unsigned k = 0; k < kBatch; ++k) lengths[k] = size;
    unsigned long long i = 0;
    while (i < count) {
      const unsigned want = count - i < kBatch ? static_cast<unsigned>(count - i) : kBatch;
      const unsigned n = gnio::eth::acquire(tx, frames, want, 1000000000);
      if (n == 0) break;
      for (unsigned k = 0; k < n; ++k) std::memcpy(frames[k].data, frame, size);
      gnio::eth::send(tx, frames, lengths, n);
      i += n;
    }
    *sent = i;
  }
};

int run_port(const Args& a) {
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::PortOptions o;
  o.interface = a.iface;
  gnio::eth::Port port(comm, o);
  std::fprintf(stderr, "gnio-eth-bench: %s: %s\n", a.iface.c_str(), port.mode().c_str());
  auto* words = static_cast<unsigned long long*>(comm.alloc_device(4 * sizeof(unsigned long long)));
  unsigned long long host[4] = {};
  std::thread cpu;
  if (a.dir == "rx") {
    const RxLoop loop{port.rx(), a.size, &words[0], &words[1], &words[2]};
    const RxLoop cpu_loop{port.rx(), a.size, &host[0], &host[1], &host[2]};
    if (a.via == "gnio")
      gnio::launch(stream, {.grid = 1, .block = 1}, loop);
    else
      cpu = std::thread(cpu_loop);
    std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
    port.stop();
    if (cpu.joinable()) cpu.join();
    comm.synchronize(stream);
    if (a.via == "gnio") {
      comm.copy(host, words, 3 * sizeof(unsigned long long), stream);
      comm.synchronize(stream);
    }
    report(a, host[0], (host[2] - host[1]) / 1e9);
  } else {
    const std::vector<std::uint8_t> f = udp_frame(a, port.mac());
    auto* frame = static_cast<std::uint8_t*>(comm.alloc_device(f.size()));
    comm.copy(frame, f.data(), f.size(), stream);
    comm.synchronize(stream);
    const auto t0 = Clock::now();
    if (a.via == "gnio") {
      auto* frames = static_cast<gnio::eth::TxFrame*>(
          comm.alloc_device(TxLoop<gnio::Warp>::kBatch * sizeof(gnio::eth::TxFrame)));
      // A warp on a GPU; one thread on the host backend, whose warps are 32 CPU threads.
      if (comm.backend() == gnio::Backend::Cuda)
        gnio::launch(stream, {.grid = 1, .block = gnio::kWarpSize},
                     TxLoop<gnio::Warp>{port.tx(), frame, a.size, a.count, frames, &words[0]});
      else
        gnio::launch(stream, {.grid = 1, .block = 1},
                     TxLoop<gnio::Thread>{port.tx(), frame, a.size, a.count, frames, &words[0]});
      comm.synchronize(stream);
      comm.free_device(frames);
      comm.copy(host, words, sizeof(unsigned long long), stream);
      comm.synchronize(stream);
    } else {
      cpu = std::thread(CpuTxLoop{port.tx(), f.data(), a.size, a.count, &host[0]});
      cpu.join();
    }
    // Sent means Linux completed them: wait for the last completion.
    while (port.stats().sent < host[0] &&
           std::chrono::duration<double>(Clock::now() - t0).count() < 30)
      std::this_thread::yield();
    const unsigned long long sent = port.stats().sent;
    report(a, sent, std::chrono::duration<double>(Clock::now() - t0).count());
    comm.free_device(frame);
    if (sent < a.count) {
      std::fprintf(stderr, "gnio-eth-bench: %llu of %llu frames sent\n", sent, a.count);
      comm.free_device(words);
      return 1;
    }
  }
  comm.free_device(words);
  return 0;
}

int run_udp(const Args& a) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) usage("cannot create a UDP socket");
  constexpr unsigned kBatch = 64;
  const unsigned payload = a.size - 42;
  std::vector<std::uint8_t> buf(kBatch * 2048, 0x5a);
  mmsghdr msgs[kBatch] = {};
  iovec iov[kBatch];
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {buf.data() + i * 2048, a.dir == "rx" ? 2048 : payload};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(a.port));
  unsigned long long n = 0;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  if (a.dir == "rx") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) usage("cannot bind");
    timeval tv{0, 100000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    Clock::time_point first{}, last{};
    while (elapsed() < a.seconds) {
      const int got = ::recvmmsg(fd, msgs, kBatch, 0, nullptr);
      if (got > 0) {
        last = Clock::now();
        if (n == 0) first = last;
        n += static_cast<unsigned>(got);
      }
    }
    report(a, n, std::chrono::duration<double>(last - first).count());
  } else {
    inet_pton(AF_INET, a.dst_ip.c_str(), &addr.sin_addr);
    for (unsigned i = 0; i < kBatch; ++i) {
      msgs[i].msg_hdr.msg_name = &addr;
      msgs[i].msg_hdr.msg_namelen = sizeof(addr);
    }
    while ((a.count == 0 || n < a.count) && (a.seconds == 0 || elapsed() < a.seconds)) {
      const int sent = ::sendmmsg(fd, msgs, kBatch, 0);
      if (sent > 0) n += static_cast<unsigned>(sent);
    }
    report(a, n, elapsed());
  }
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage("no direction (rx or tx)");
  Args a;
  a.dir = argv[1];
  if (a.dir != "rx" && a.dir != "tx") usage("the direction is rx or tx");
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage(("no value after " + k).c_str());
      return std::string(argv[++i]);
    };
    if (k == "--via")
      a.via = value();
    else if (k == "--port")
      a.port = static_cast<unsigned>(std::stoul(value()));
    else if (k == "--seconds")
      a.seconds = std::stod(value());
    else if (k == "--count")
      a.count = std::stoull(value());
    else if (k == "--size")
      a.size = static_cast<unsigned>(std::stoul(value()));
    else if (k == "--dst-mac")
      a.dst_mac = value();
    else if (k == "--src")
      a.src_ip = value();
    else if (k == "--dst")
      a.dst_ip = value();
    else if (k[0] != '-' && a.iface.empty())
      a.iface = k;
    else
      usage(("unknown argument " + k).c_str());
  }
  if (a.size < 60 || a.size > 1514) usage("--size must be within 60..1514");
  try {
    if (a.via == "udp") return run_udp(a);
    if (a.via != "gnio" && a.via != "cpu") usage("--via is gnio, cpu or udp");
    if (a.iface.empty()) usage("no interface");
    return run_port(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gnio-eth-bench: %s\n", e.what());
    return 1;
  }
}
