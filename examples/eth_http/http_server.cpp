// HTTP GET responder: a kernel answers HTTP/1.1 GET requests on TCP port 80 (or --port) of a
// network interface's queue, handshake included, with a fixed page, building every segment
// itself, as the HTTP server kernel of GPUNetIO's packet-processing application does. It keeps
// no connection state: its sequence numbers come back in the client's acknowledgements.
//
//   gnio-run -n 1 -- http_server INTERFACE [--port P] [--queue Q] [--seconds S] [--count N]
//   [--packet]
//
// Per connection: SYN -> SYN-ACK; a segment starting "GET " -> the response, all in one segment
// with FIN (pages up to 1400 bytes); the client's FIN -> ACK. Other requests get "405 Method Not
// Allowed", anything else is dropped and counted. Runs until N pages were served or S seconds
// passed (default 10). Needs CAP_NET_ADMIN and CAP_NET_RAW (root) and libxdp.
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
#include "gnio/semaphore.hpp"

namespace {

struct Counts {
  unsigned long long connections, pages, refused, closes, dropped;
};

struct HttpKernel {
  gnio::eth::RxQueue rx;
  gnio::eth::TxQueue tx;
  std::uint16_t port;
  const std::uint8_t* page;  // the whole response, headers included
  unsigned page_bytes;
  const std::uint8_t* refusal;
  unsigned refusal_bytes;
  Counts* counts;
  unsigned long long* served;  // pages so far, in memory the CPU reads (a semaphore's record)

  GNIO_HD_INLINE void operator()() const {
    using namespace gnio::packet;
    constexpr unsigned kBatch = 32;
    gnio::eth::Packet p[kBatch];
    Counts c{};
    while (!rx.stopped()) {
      const unsigned n = gnio::eth::receive(rx, p, kBatch, 2000000);
      for (unsigned i = 0; i < n; ++i) {
        const TcpView t = parse_tcp(p[i].data, p[i].length);
        if (!t.ok || t.dst_port != port || (t.flags & kTcpRst)) {
          ++c.dropped;
          continue;
        }
        gnio::eth::TxFrame f;
        if (!gnio::eth::acquire(tx, &f, 100000000)) {
          ++c.dropped;
          continue;
        }
        unsigned length = 0;
        if (t.flags & kTcpSyn) {
          // Our initial sequence number; the client's acknowledgements carry it (plus one).
          const std::uint32_t isn = 0x47000000u ^ t.seq ^ t.src_port;
          length =
              make_tcp_reply(p[i].data, t, isn, t.seq + 1, kTcpSyn | kTcpAck, nullptr, 0, f.data);
          ++c.connections;
        } else if (t.payload_bytes > 0) {
          const bool get = t.payload_bytes >= 4 && t.payload[0] == 'G' && t.payload[1] == 'E' &&
                           t.payload[2] == 'T' && t.payload[3] == ' ';
          length = make_tcp_reply(p[i].data, t, t.ack, t.seq + t.payload_bytes,
                                  kTcpAck | kTcpPsh | kTcpFin, get ? page : refusal,
                                  get ? page_bytes : refusal_bytes, f.data);
          if (get) {
            ++c.pages;
            gnio::dev::atomic_store(served, c.pages, gnio::dev::Order::Release);
          } else {
            ++c.refused;
          }
        } else if (t.flags & kTcpFin) {
          length = make_tcp_reply(p[i].data, t, t.ack, t.seq + 1, kTcpAck, nullptr, 0, f.data);
          ++c.closes;
        } else {
          continue;  // a bare ACK: nothing to answer (the TX frame is reused next time)
        }
        gnio::eth::send(tx, f, length);
      }
      gnio::eth::release(rx, n);
    }
    *counts = c;
  }
};

std::string response(int status, const char* reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/html\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\nServer: gnio-kernel\r\n\r\n" + body;
}

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(
        stderr, "usage: %s INTERFACE [--port P] [--queue Q] [--seconds S] [--count N] [--packet]\n",
        argv[0]);
    return 2;
  }
  gnio::eth::PortOptions options;
  options.interface = argv[1];
  double seconds = 10;
  unsigned long long count = 0;
  int port = 80;
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
    else if (a == "--packet")
      options.socket = gnio::eth::SocketKind::Packet;
    else {
      std::fprintf(stderr, "http_server: unknown or incomplete argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (port < 1 || port > 65535) {
    std::fprintf(stderr, "http_server: --port %d is not within 1..65535\n", port);
    return 2;
  }
  const std::string page =
      response(200, "OK", "<html><body><h1>Hello from a gnio kernel</h1></body></html>\n");
  const std::string refusal = response(405, "Method Not Allowed", "GET only\n");
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  gnio::eth::Port eth(comm, options);
  std::printf("http_server: %s queue %u: %s; serving port %d\n", options.interface.c_str(),
              options.queue, eth.mode().c_str(), port);
  std::fflush(stdout);
  auto* text = static_cast<std::uint8_t*>(comm.alloc_device(page.size() + refusal.size()));
  auto* counts = static_cast<Counts*>(comm.alloc_device(sizeof(Counts)));
  comm.copy(text, page.data(), page.size(), stream);
  comm.copy(text + page.size(), refusal.data(), refusal.size(), stream);
  // The kernel reports its progress in the record of a one-item semaphore (memory both reach).
  gnio::Semaphore progress(comm, 1, sizeof(unsigned long long));
  unsigned long long* served = progress.device_handle().info_of<unsigned long long>(0);
  comm.synchronize(stream);
  gnio::launch(stream, {.grid = 1, .block = 1},
               HttpKernel{eth.rx(), eth.tx(), static_cast<std::uint16_t>(port), text,
                          static_cast<unsigned>(page.size()), text + page.size(),
                          static_cast<unsigned>(refusal.size()), counts, served});
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds &&
         (count == 0 || gnio::dev::atomic_load(served, gnio::dev::Order::Acquire) < count))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The last page's closing handshake: give the client a moment to send its FIN.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  eth.stop();
  comm.synchronize(stream);
  Counts c{};
  comm.copy(&c, counts, sizeof(c), stream);
  comm.synchronize(stream);
  comm.free_device(counts);
  comm.free_device(text);
  std::printf(
      "http_server: %llu connections, %llu pages served, %llu requests refused (not "
      "GET), %llu closes acknowledged, %llu segments dropped\n",
      c.connections, c.pages, c.refused, c.closes, c.dropped);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
}
