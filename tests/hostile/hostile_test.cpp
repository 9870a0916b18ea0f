// Garbage during a running job. The bootstrap's root service is tested against strays during
// init (tests/bootstrap); after init the listeners that stay open (every rank's bootstrap peer
// listener, rank 0's liveness listener until every rank has connected) must survive them too.
// Every rank runs a thread that finds every rank's listening TCP ports from /proc (the ports are
// not guessed from gnio's own state: whatever a scanner can find is attacked) and hammers them
// with connect-close, resets, random bytes, stalled half hellos, and well-formed hellos (peer,
// register, liveness purposes) and frames with a wrong token, while the ranks run bootstrap
// allgathers, device puts to a neighbour, team syncs and allreduces whose every byte is checked.
// The job must finish with correct data, no rank reported lost, and every rank's listener must
// have dropped strays.
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/wire.hpp"
#include "common/gnio_test.hpp"
#ifdef GNIO_HOSTILE_COLL
#include "gnio/coll.hpp"
#endif

namespace {

using gnio::DeviceComm;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::stream;
namespace bs = gnio::bootstrap;

constexpr int kMaxPorts = 8;
// The job runs at least this many iterations and at least this long (the hammers need time to
// try every kind of garbage on every port many times).
constexpr int kMinIterations = 30;
constexpr double kMinSeconds = 3;
constexpr int kMaxIterations = 100000;

/// Inodes of the sockets this process holds.
std::set<unsigned long> socket_inodes() {
  std::set<unsigned long> inodes;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return inodes;
  while (dirent* e = ::readdir(d)) {
    char link[128] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
    unsigned long inode = 0;
    if (n > 0 && std::sscanf(link, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  ::closedir(d);
  return inodes;
}

/// The TCP ports this process listens on, as a port scanner on the host would find them.
std::vector<std::uint16_t> listening_ports() {
  const std::set<unsigned long> mine = socket_inodes();
  std::vector<std::uint16_t> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout;
      unsigned long inode = 0;
      in >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !mine.count(inode)) continue;  // 0A = LISTEN
      const unsigned port = std::stoul(local.substr(local.find(':') + 1), nullptr, 16);
      ports.push_back(static_cast<std::uint16_t>(port));
    }
  }
  return ports;
}

/// What every rank tells the others: where it listens.
struct Target {
  bs::NetAddress addr;  // the bootstrap listener's address (every listener binds to it)
  std::int32_t ports = 0;
  std::uint16_t port[kMaxPorts] = {};
};

/// The attacker: until `stop`, one stray connection after another to every target port.
class Hammer {
 public:
  Hammer(std::vector<Target> targets, std::uint64_t token, int size, unsigned seed)
      : targets_(std::move(targets)), token_(token), size_(size), rng_(seed) {
    thread_ = std::thread([this] { run(); });
  }
  ~Hammer() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t attacks() const { return attacks_.load(); }
  std::uint64_t connected() const { return connected_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      for (const Target& t : targets_)
        for (int i = 0; i < t.ports && !stop_.load(); ++i) attack(t.addr, t.port[i]);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  void send_bytes(int fd, const void* p, std::size_t n) {
    (void)::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void attack(const bs::NetAddress& where, std::uint16_t port) {
    bs::SockAddr to = bs::SockAddr::from_net(where);
    to.set_port(port);
    int err = 0;
    bs::Fd fd = bs::connect_tcp(to, gnio::Deadline::after(1), &err);
    attacks_.fetch_add(1);
    if (!fd) return;  // refused: a listener that closed after init (liveness)
    connected_.fetch_add(1);
    const int kind = static_cast<int>(rng_() % 8);
    std::uint64_t wrong = token_ ^ (1 + rng_() % 0xffff);
    const int rank = static_cast<int>(rng_() % static_cast<unsigned>(size_));
    unsigned char hello[bs::kHelloBytes];
    switch (kind) {
      case 0: break;  // connect and close: a port scan
      case 1: {       // random bytes
        std::vector<unsigned char> junk(1 + rng_() % 3000);
        for (auto& b : junk) b = static_cast<unsigned char>(rng_());
        send_bytes(fd.get(), junk.data(), junk.size());
        break;
      }
      case 2:
      case 3:
      case 4: {  // a well-formed hello of another job, then a frame
        const bs::Purpose purpose = kind == 2   ? bs::Purpose::Peer
                                    : kind == 3 ? bs::Purpose::Liveness
                                                : bs::Purpose::Register;
        bs::encode_hello({purpose, wrong, rank, size_}, hello);
        send_bytes(fd.get(), hello, sizeof(hello));
        bs::FrameHeader h;
        h.type = bs::FrameType::Data;
        h.src = rank;
        h.length = 64;
        unsigned char frame[bs::kFrameHeaderBytes + 64] = {};
        bs::encode_frame_header(h, frame);
        send_bytes(fd.get(), frame, sizeof(frame));
        break;
      }
      case 5: {  // a hello of another job claiming every rank in turn, and an oversized size
        bs::encode_hello({bs::Purpose::Peer, wrong, rank, size_ + 1000}, hello);
        send_bytes(fd.get(), hello, sizeof(hello));
        break;
      }
      case 6: {  // half a hello, then silence for a while
        bs::encode_hello({bs::Purpose::Peer, wrong, rank, size_}, hello);
        send_bytes(fd.get(), hello, 10);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        break;
      }
      case 7: {  // bytes, then a reset instead of a close
        send_bytes(fd.get(), "GET / HTTP/1.0\r\n\r\n", 18);
        linger l{1, 0};
        ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        break;
      }
    }
  }

  std::vector<Target> targets_;
  std::uint64_t token_;
  int size_;
  std::mt19937_64 rng_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> attacks_{0}, connected_{0};
  std::thread thread_;
};

void put_kernel(DeviceComm dc, SymPtr<std::uint32_t> dst, const std::uint32_t* src,
                std::size_t count, int peer) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    dc.put(dst, src, count, peer);
    dc.quiet();
    (void)dc.sync(dc.world());
  });
}

TEST(Hostile, JobSurvivesGarbageOnItsListeners) {
  gnio::Comm& c = comm();
  const int me = c.rank(), n = c.size();
  auto* tcp = dynamic_cast<bs::TcpBootstrap*>(&c.bootstrap());
  ASSERT_NE(tcp, nullptr) << "the test needs gnio-run's TCP bootstrap";

  std::vector<Target> targets(static_cast<std::size_t>(n));
  Target& mine = targets[static_cast<std::size_t>(me)];
  mine.addr = tcp->listen_address().to_net();
  for (std::uint16_t p : listening_ports())
    if (mine.ports < kMaxPorts) mine.port[mine.ports++] = p;
  c.bootstrap().allgather(targets.data(), sizeof(Target));
  bool found_bootstrap = false;
  for (int i = 0; i < mine.ports; ++i) found_bootstrap |= mine.port[i] == mine.addr.port;
  ASSERT_TRUE(found_bootstrap) << "rank " << me << ": /proc did not show the bootstrap listener";

  Hammer hammer(targets, c.bootstrap().token(), n, 1234u + static_cast<unsigned>(me));

  constexpr std::size_t kWords = 512;
  SymPtr<std::uint32_t> inbox = c.alloc<std::uint32_t>(kWords);
  auto* outbox = static_cast<std::uint32_t*>(c.alloc_device(kWords * sizeof(std::uint32_t)));
#ifdef GNIO_HOSTILE_COLL
  auto* send = static_cast<std::int64_t*>(c.alloc_device(kWords * sizeof(std::int64_t)));
  auto* recv = static_cast<std::int64_t*>(c.alloc_device(kWords * sizeof(std::int64_t)));
#endif
  const DeviceComm dc = c.device_handle();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<std::uint32_t> words(kWords);
  const auto start = std::chrono::steady_clock::now();
  bool more = true;
  int it = 0;
  for (; more && it < kMaxIterations; ++it) {
    // Bootstrap allgather; it also carries whether each rank wants to go on (the job ends when
    // none does, the same iteration everywhere).
    const bool want_more =
        it + 1 < kMinIterations ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
            kMinSeconds;
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    all[static_cast<std::size_t>(me)] = 2 * (1000003LL * it + me) + (want_more ? 1 : 0);
    c.bootstrap().allgather(all.data(), sizeof(std::int64_t));
    more = false;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(all[static_cast<std::size_t>(r)] / 2, 1000003LL * it + r);
      more |= (all[static_cast<std::size_t>(r)] & 1) != 0;
    }

    // RMA: a put to the next rank, then a team sync; check what the previous rank put here.
    for (std::size_t i = 0; i < kWords; ++i)
      words[i] = static_cast<std::uint32_t>(0x9e3779b9u * (it + 1) + i * 31 + me * 7919 + 1);
    c.copy(outbox, words.data(), kWords * sizeof(std::uint32_t), stream());
    put_kernel(dc, inbox, outbox, kWords, next);
    c.synchronize(stream());
    c.copy(words.data(), c.local(inbox), kWords * sizeof(std::uint32_t), stream());
    c.synchronize(stream());
    for (std::size_t i = 0; i < kWords; ++i)
      ASSERT_EQ(words[i],
                static_cast<std::uint32_t>(0x9e3779b9u * (it + 1) + i * 31 + prev * 7919 + 1))
          << "iteration " << it << " word " << i;
    c.bootstrap().barrier();  // nobody overwrites the inbox before its owner has read it

#ifdef GNIO_HOSTILE_COLL
    std::vector<std::int64_t> in(kWords), out(kWords);
    for (std::size_t i = 0; i < kWords; ++i)
      in[i] = static_cast<std::int64_t>(i) * (me + 1) + it * 1000 + me;
    c.copy(send, in.data(), kWords * sizeof(std::int64_t), stream());
    gnio::allreduce(c, send, recv, kWords, gnio::DataType::I64, gnio::RedOp::Sum, stream());
    c.copy(out.data(), recv, kWords * sizeof(std::int64_t), stream());
    c.synchronize(stream());
    for (std::size_t i = 0; i < kWords; ++i) {
      const std::int64_t want = static_cast<std::int64_t>(i) * n * (n + 1) / 2 +
                                std::int64_t{it} * 1000 * n + n * (n - 1) / 2;
      ASSERT_EQ(out[i], want) << "iteration " << it << " element " << i;
    }
#endif
  }
  hammer.stop();
  c.bootstrap().barrier();
  EXPECT_NO_THROW(c.check());
  EXPECT_FALSE(c.aborted());
  EXPECT_GE(it, kMinIterations);
  EXPECT_GT(hammer.attacks(), 100u);
  EXPECT_GT(hammer.connected(), 50u);
  // Every rank's listener saw strays (three hammers aim at it) and dropped them.
  EXPECT_GT(tcp->dropped_connections(), 0u) << "rank " << me;
  std::printf("rank %d: %d iterations, %llu attacks (%llu connected), listener dropped %llu\n", me,
              it, static_cast<unsigned long long>(hammer.attacks()),
              static_cast<unsigned long long>(hammer.connected()),
              static_cast<unsigned long long>(tcp->dropped_connections()));
  c.free(inbox);
  c.free_device(outbox);
}

}  // namespace
