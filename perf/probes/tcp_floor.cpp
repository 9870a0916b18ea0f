// gnio-tcp-floor: what raw TCP does on this machine, the floor every network figure of gnio is
// compared with (measured in the same session; see docs/guide/benchmarks.md).
//
//   gnio-tcp-floor [--quick] [--streams 1,4,8] [--bytes SIZE] [--reps N] [--json FILE]
//
// Threads of one process over loopback (127.0.0.1), with what a proxy thread does and no more:
// TCP_NODELAY, non-blocking sockets, no framing. The latency ping-pong spins on its sockets; the
// throughput and record measurements wait in poll() when a socket is full or empty, so that
// threads beyond the cores (8 streams on 2 cores) do not take the cores the other ends need.
//  * latency: 8-byte ping-pong; one way = round trip / 2, median and 99th percentile.
//  * throughput over N streams: N connections, each with its own sending and receiving thread,
//    together moving --bytes (1 MiB per send call); GB/s (1e9 bytes) = bytes / wall time from the
//    first byte sent to the last received, median over --reps.
//  * records: 16-byte records over one connection, written in batches of 64 KiB per system call
//    and one record per call; records/s.
// No gnio code is involved: the figures are the wire's, not the library's.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "gnio-tcp-floor: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

/// A connected pair of loopback TCP sockets (both non-blocking, TCP_NODELAY).
struct Connection {
  int a = -1, b = -1;
  Connection() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) die("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0) die("bind");
    if (::listen(listener, 1) != 0) die("listen");
    if (::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) die("getsockname");
    a = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (a < 0 || ::connect(a, reinterpret_cast<sockaddr*>(&addr), len) != 0) die("connect");
    b = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (b < 0) die("accept");
    ::close(listener);
    for (int fd : {a, b}) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  ~Connection() {
    ::close(a);
    ::close(b);
  }
};

/// Waits in poll() for `events` on fd (the throughput measurements: with more threads than
/// cores, threads that spin on a full socket take the cores the other end needs).
void wait_for(int fd, short events) {
  pollfd p{fd, events, 0};
  (void)::poll(&p, 1, 100);
}

/// Writes all of [p, p + n); while the socket is full, spins (`spin`) or waits in poll().
void send_all(int fd, const void* p, std::size_t n, bool spin = true) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k > 0) {
      c += k;
      n -= static_cast<std::size_t>(k);
    } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      die("send");
    } else if (!spin) {
      wait_for(fd, POLLOUT);
    }
  }
}

/// Reads exactly n bytes into p; while none are there, spins (`spin`) or waits in poll().
void recv_all(int fd, void* p, std::size_t n, bool spin = true) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k > 0) {
      c += k;
      n -= static_cast<std::size_t>(k);
    } else if (k == 0) {
      errno = ECONNRESET;
      die("recv (closed)");
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      die("recv");
    } else if (!spin) {
      wait_for(fd, POLLIN);
    }
  }
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Latency {
  double one_way_us, p99_us;
};

/// 8-byte ping-pong over one connection: the reply thread echoes what it reads.
Latency measure_latency(int iters) {
  Connection c;
  const int warmup = std::max(100, iters / 10);
  std::thread echo([&] {
    std::uint64_t v = 0;
    for (int i = 0; i < warmup + iters; ++i) {
      recv_all(c.b, &v, sizeof(v));
      ++v;
      send_all(c.b, &v, sizeof(v));
    }
  });
  std::vector<double> rtt;
  rtt.reserve(static_cast<std::size_t>(iters));
  std::uint64_t v = 1;
  for (int i = 0; i < warmup + iters; ++i) {
    const auto t0 = Clock::now();
    const std::uint64_t sent = v;
    send_all(c.a, &v, sizeof(v));
    recv_all(c.a, &v, sizeof(v));
    if (v != sent + 1) {
      std::fprintf(stderr, "gnio-tcp-floor: ping-pong returned %llu, expected %llu\n",
                   static_cast<unsigned long long>(v), static_cast<unsigned long long>(sent + 1));
      std::exit(1);
    }
    if (i >= warmup) rtt.push_back(seconds_since(t0) * 1e6);
  }
  echo.join();
  std::sort(rtt.begin(), rtt.end());
  return {rtt[rtt.size() / 2] / 2, rtt[rtt.size() * 99 / 100] / 2};
}

/// `total` bytes over `streams` connections at once; GB/s. The receivers check the last byte of
/// every 1 MiB piece (a running counter), so a stream that lost or reordered data fails.
double measure_throughput(int streams, std::size_t total) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::vector<std::unique_ptr<Connection>> conns;
  for (int s = 0; s < streams; ++s) conns.push_back(std::make_unique<Connection>());
  const std::size_t per_stream = std::max(kPiece, total / static_cast<std::size_t>(streams));
  const std::size_t pieces = per_stream / kPiece;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<std::uint8_t> buf(kPiece, static_cast<std::uint8_t>(s + 1));
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      for (std::size_t p = 0; p < pieces; ++p) {
        buf[kPiece - 1] = static_cast<std::uint8_t>(p);
        send_all(conns[static_cast<std::size_t>(s)]->a, buf.data(), kPiece, false);
      }
    });
    threads.emplace_back([&, s] {
      std::vector<std::uint8_t> buf(kPiece);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      for (std::size_t p = 0; p < pieces; ++p) {
        recv_all(conns[static_cast<std::size_t>(s)]->b, buf.data(), kPiece, false);
        if (buf[kPiece - 1] != static_cast<std::uint8_t>(p) ||
            buf[0] != static_cast<std::uint8_t>(s + 1)) {
          std::fprintf(stderr, "gnio-tcp-floor: stream %d piece %zu arrived wrong\n", s, p);
          std::exit(1);
        }
      }
    });
  }
  while (ready.load() < 2 * streams) {
  }
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  const double s = seconds_since(t0);
  return static_cast<double>(pieces * kPiece * static_cast<std::size_t>(streams)) / s / 1e9;
}

/// `records` 16-byte records over one connection, `batch` bytes per send call; records/s. Each
/// record carries its number, checked by the receiver.
double measure_records(std::size_t records, std::size_t batch) {
  constexpr std::size_t kRecord = 16;
  Connection c;
  const std::size_t per_call = std::max<std::size_t>(1, batch / kRecord);
  std::thread reader([&] {
    std::vector<std::uint64_t> buf(2 * per_call);
    std::size_t seen = 0;
    while (seen < records) {
      const std::size_t n = std::min(per_call, records - seen);
      recv_all(c.b, buf.data(), n * kRecord, false);
      for (std::size_t i = 0; i < n; ++i)
        if (buf[2 * i] != seen + i) {
          std::fprintf(stderr, "gnio-tcp-floor: record %zu arrived as %llu\n", seen + i,
                       static_cast<unsigned long long>(buf[2 * i]));
          std::exit(1);
        }
      seen += n;
    }
  });
  std::vector<std::uint64_t> buf(2 * per_call);
  const auto t0 = Clock::now();
  for (std::size_t sent = 0; sent < records;) {
    const std::size_t n = std::min(per_call, records - sent);
    for (std::size_t i = 0; i < n; ++i) {
      buf[2 * i] = sent + i;
      buf[2 * i + 1] = ~(sent + i);
    }
    send_all(c.a, buf.data(), n * kRecord, false);
    sent += n;
  }
  reader.join();
  return static_cast<double>(records) / seconds_since(t0);
}

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k': v *= 1024; break;
    case 'M':
    case 'm': v *= 1024 * 1024; break;
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<std::size_t>(v);
}

void usage() {
  std::puts(
      "usage: gnio-tcp-floor [--quick] [--streams LIST] [--bytes SIZE] [--reps N] [--json FILE]\n"
      "raw loopback TCP between threads of one process: 8-byte one-way latency (ping-pong / 2),\n"
      "throughput over N streams (default 1,4,8; SIZE in all, default 1G, 256M with --quick),\n"
      "16-byte record rate batched (64 KiB per send) and one record per send");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<int> streams = {1, 4, 8};
  std::size_t bytes = 0;
  int reps = 3;
  const char* json = nullptr;
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    command += " " + a;
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      command += std::string(" ") + argv[i + 1];
      return argv[++i];
    };
    if (a == "--quick") {
      quick = true;
    } else if (a == "--streams") {
      streams.clear();
      std::string list = value();
      for (std::size_t p = 0; p < list.size();) {
        const std::size_t e = std::min(list.find(',', p), list.size());
        streams.push_back(std::max(1, std::atoi(list.substr(p, e - p).c_str())));
        p = e + 1;
      }
    } else if (a == "--bytes") {
      bytes = parse_size(value());
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(value()));
    } else if (a == "--json") {
      json = value();
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (bytes == 0) bytes = quick ? std::size_t{256} << 20 : std::size_t{1} << 30;
  const int lat_iters = quick ? 2000 : 20000;
  const std::size_t batched = quick ? 4000000 : 20000000, single = quick ? 200000 : 1000000;

  const Latency lat = measure_latency(lat_iters);
  std::printf("# gnio-tcp-floor: raw loopback TCP, threads of one process\n");
  std::printf("%-34s %12.2f us (p99 %.2f us)\n", "8 B one way (ping-pong / 2)", lat.one_way_us,
              lat.p99_us);
  std::vector<std::pair<int, double>> tput;
  for (int n : streams) {
    std::vector<double> runs;
    for (int r = 0; r < reps; ++r) runs.push_back(measure_throughput(n, bytes));
    tput.emplace_back(n, median(runs));
    std::printf("%-34s %12.2f GB/s\n", (std::to_string(n) + " stream(s)").c_str(), median(runs));
  }
  const double batched_rate = measure_records(batched, 64 * 1024);
  const double single_rate = measure_records(single, 16);
  std::printf("%-34s %12.2f M records/s\n", "16 B records, 64 KiB per send", batched_rate / 1e6);
  std::printf("%-34s %12.2f M records/s\n", "16 B records, one per send", single_rate / 1e6);

  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) die(json);
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::fprintf(f,
                 "{\"schema\": \"gnio-perf/1\", \"subcommand\": \"tcp-floor\", \"date\": \"%s\", "
                 "\"host\": \"%s\", \"command\": \"%s\", \"cpus\": %u,\n \"rows\": [\n",
                 date, host, command.c_str(), std::thread::hardware_concurrency());
    std::fprintf(f,
                 "  {\"measure\": \"latency\", \"bytes\": 8, \"one_way_us\": %.3f, "
                 "\"p99_one_way_us\": %.3f},\n",
                 lat.one_way_us, lat.p99_us);
    for (const auto& [n, g] : tput)
      std::fprintf(
          f, "  {\"measure\": \"throughput\", \"streams\": %d, \"bytes\": %zu, \"gbps\": %.3f},\n",
          n, bytes, g);
    std::fprintf(f,
                 "  {\"measure\": \"records\", \"record_bytes\": 16, \"batch_bytes\": 65536, "
                 "\"records_per_s\": %.0f},\n",
                 batched_rate);
    std::fprintf(f,
                 "  {\"measure\": \"records\", \"record_bytes\": 16, \"batch_bytes\": 16, "
                 "\"records_per_s\": %.0f}\n ]}\n",
                 single_rate);
    std::fclose(f);
  }
  return 0;
}
