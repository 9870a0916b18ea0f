// eth::Port over AF_XDP. libxdp creates the socket and loads its XDP program (the one that
// redirects the queue's packets to the socket); it is loaded at run time (dlopen), so libgnio
// does not depend on it and machines without it lose only packet I/O. The rings and the UMEM are
// registered with the device so that kernels use them in place; a CPU thread wakes the socket
// for transmission (copy mode sends only inside a system call).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "base/dynamic_library.hpp"
#include "base/fail.hpp"
#include "base/thread_name.hpp"
#include "core/comm_services.hpp"
#include "gnio/config.hpp"
#include "gnio/eth.hpp"
#include "gnio/log.hpp"
#include "platform/backend.hpp"

namespace gnio::eth {
namespace {

/// libxdp's and libbpf's messages, at gnio's trace level (GNIO_DEBUG=TRACE shows them).
int library_note(int, const char* fmt, va_list ap) {
  char text[512];
  std::vsnprintf(text, sizeof(text), fmt, ap);
  std::size_t n = std::strlen(text);
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  GNIO_LOG(Trace, Eth, "xdp: %s", text);
  return 0;
}

/// The libxdp functions the port uses, looked up once.
struct XdpLibrary {
  decltype(&xsk_umem__create) umem_create = nullptr;
  decltype(&xsk_umem__delete) umem_delete = nullptr;
  decltype(&xsk_socket__create) socket_create = nullptr;
  decltype(&xsk_socket__delete) socket_delete = nullptr;
  decltype(&xsk_socket__fd) socket_fd = nullptr;
  std::string error;  ///< why it is unusable; empty when usable

  static const XdpLibrary& get() {
    static const XdpLibrary lib = [] {
      XdpLibrary l;
      void* h = dlopen("libxdp.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        l.error = std::string("libxdp is not installed (") + dlerror() +
                  "); install libxdp1 and libbpf1 (Debian) or put them on LD_LIBRARY_PATH";
        return l;
      }
      auto sym = [&](auto& f, const char* name) { bind_symbol(h, f, name, "libxdp", &l.error); };
      sym(l.umem_create, "xsk_umem__create");
      sym(l.umem_delete, "xsk_umem__delete");
      sym(l.socket_create, "xsk_socket__create");
      sym(l.socket_delete, "xsk_socket__delete");
      sym(l.socket_fd, "xsk_socket__fd");
      // libxdp and libbpf print their notes ("No bpffs found ...") on stderr: to gnio's log.
      using XdpPrint = int (*)(int, const char*, va_list);
      using SetPrint = XdpPrint (*)(XdpPrint);
      if (auto set = reinterpret_cast<SetPrint>(dlsym(h, "libxdp_set_print"))) set(&library_note);
      if (void* bpf = dlopen("libbpf.so.1", RTLD_NOW | RTLD_NOLOAD))
        if (auto set = reinterpret_cast<SetPrint>(dlsym(bpf, "libbpf_set_print")))
          set(&library_note);
      return l;
    }();
    return lib;
  }
};

std::size_t page_size() {
  return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

/// A libxdp ring (producer or consumer side: the same fields) as kernels see it.
template <class XskRing>
Ring ring_of(const XskRing& r) {
  return Ring{r.producer, r.consumer, r.ring, r.mask};
}

/// The page-aligned span of a ring's mapping: its index words and its entries.
std::pair<void*, std::size_t> mapping_of(const Ring& r, std::size_t entry_bytes) {
  auto lo = std::min({reinterpret_cast<std::uintptr_t>(r.producer),
                      reinterpret_cast<std::uintptr_t>(r.consumer),
                      reinterpret_cast<std::uintptr_t>(r.entries)});
  const auto hi = reinterpret_cast<std::uintptr_t>(r.entries) + (r.mask + 1) * entry_bytes;
  lo &= ~(page_size() - 1);
  return {reinterpret_cast<void*>(lo), hi - lo};
}

/// How a port's CPU thread idles: it polls for GNIO_PROXY_SPIN_US after its last work (the
/// latency of the next frame against a busy core; 10 ms on GPUs, 0 on the host backend, as the
/// proxies' threads), then sleeps in short steps (kernels cannot wake it).
class Idler {
 public:
  explicit Idler(platform::BackendKind kind) {
    const long long us = config_int("GNIO_PROXY_SPIN_US");
    spin_ = std::chrono::microseconds(us >= 0                               ? us
                                      : kind == platform::BackendKind::Host ? 0
                                                                            : 10000);
  }
  void worked() {
    idle_ = 0;
    last_ = std::chrono::steady_clock::now();
  }
  void idle() {
    if (++idle_ < 256 || std::chrono::steady_clock::now() - last_ < spin_)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(idle_ < 4096 ? 5 : 50));
  }

 private:
  std::chrono::microseconds spin_{0};
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  unsigned idle_ = 0;
};

std::uint32_t load_acquire(const std::uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
void store_release(std::uint32_t* p, std::uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

}  // namespace

struct Port::Impl {
  std::optional<Comm> comm;  // kept alive: its backend registered the port's memory
  platform::Backend* backend = nullptr;
  PortOptions options;
  int ifindex = 0;
  std::uint8_t mac[6] = {};
  std::uint8_t* umem_area = nullptr;
  std::size_t umem_bytes = 0;
  // AF_XDP: libxdp's socket and the rings it mapped.
  xsk_umem* umem = nullptr;
  xsk_socket* xsk = nullptr;
  xsk_ring_prod xfill{}, xtx{};
  xsk_ring_cons xcompletion{}, xrx{};
  // AF_PACKET: the socket, and rings of the same layout in host memory the device reaches.
  int packet_fd = -1;
  void* soft_rings = nullptr;
  // PACKET_STATISTICS resets on each read: the total of the reads (stats() may run on any thread).
  mutable std::atomic<std::uint64_t> packet_drops{0};
  // The rings kernels use (either kind).
  Ring fill, completion, rx, tx;
  std::uint32_t* words = nullptr;  // host-mapped: [0] stop (the host writes it, kernels read it)
  // Device memory: the rx and tx handoffs (the Coop forms' counts; a group's leader hands its
  // count over in memory next to the group, not across PCIe).
  std::uint32_t* handoffs = nullptr;
  static constexpr std::size_t kRxHandoff = 0;
  static constexpr std::size_t kTxHandoff = 32;
  std::vector<void*> registered;
  std::string mode;
  std::thread worker;
  std::atomic<bool> quit{false};
  std::atomic<std::uint64_t> wakeups{0};

  ~Impl() { close(); }

  // What both sides of the queue hold alike: the UMEM, the stop word and the side's handoff.
  template <class Queue>
  Queue queue_side(std::size_t handoff) const {
    Queue q;
    q.umem = umem_area;
    q.stop = &words[0];
    q.handoff = &handoffs[handoff];
    return q;
  }

  void open();
  /// Opens an AF_XDP socket; "" once it is up, otherwise why not (throws for what a fallback
  /// cannot mend: no permission, a busy queue).
  std::string open_xdp();
  void open_packet();
  void close() noexcept;
  void wake_loop();  // AF_XDP: wakes the socket to send
  void copy_loop();  // AF_PACKET: moves frames between the socket and the rings
};

void Port::Impl::open() {
  const PortOptions& o = options;
  GNIO_REQUIRE(!o.interface.empty() && o.interface.size() < IFNAMSIZ,
               "eth::Port: '%s' is not an interface name", o.interface.c_str());
  GNIO_REQUIRE(o.frames >= 64 && (o.frames & (o.frames - 1)) == 0,
               "eth::Port: frames=%u must be a power of two, at least 64", o.frames);
  GNIO_REQUIRE(o.frame_size == 2048 || o.frame_size == 4096,
               "eth::Port: frame_size=%u must be 2048 or 4096", o.frame_size);
  ifindex = static_cast<int>(if_nametoindex(o.interface.c_str()));
  GNIO_REQUIRE(ifindex > 0, "eth::Port: no interface '%s' in this network namespace",
               o.interface.c_str());
  {
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, o.interface.c_str(), IFNAMSIZ - 1);
    if (s >= 0 && ::ioctl(s, SIOCGIFHWADDR, &ifr) == 0)
      std::memcpy(mac, ifr.ifr_hwaddr.sa_data, sizeof(mac));
    if (s >= 0) ::close(s);
  }
  umem_bytes = static_cast<std::size_t>(o.frames) * o.frame_size;
  void* area = ::mmap(nullptr, umem_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (area == MAP_FAILED) fail_errno("eth::Port: mmap of %zu bytes of packet memory", umem_bytes);
  umem_area = static_cast<std::uint8_t*>(area);

  const std::string no_xdp = o.socket == SocketKind::Packet ? "" : open_xdp();
  if (o.socket == SocketKind::Xdp && !no_xdp.empty())
    fail(ErrorClass::Unsupported, "eth::Port: %s", no_xdp.c_str());
  if (o.socket == SocketKind::Packet || !no_xdp.empty()) {
    open_packet();
    mode =
        "AF_PACKET, a CPU thread copies frames between the socket and the rings; the Linux "
        "stack sees every packet too";
    mode += o.socket == SocketKind::Packet ? " (asked for)" : " (AF_XDP: " + no_xdp + ")";
  }

  // Every receive frame (the first half of the UMEM) goes to the fill ring.
  const std::uint32_t half = o.frames / 2;
  auto* fill_addrs = static_cast<std::uint64_t*>(fill.entries);
  for (std::uint32_t i = 0; i < half; ++i)
    fill_addrs[i & fill.mask] = static_cast<std::uint64_t>(i) * o.frame_size;
  store_release(fill.producer, *fill.producer + half);

  words = static_cast<std::uint32_t*>(backend->alloc_host_mapped(64 * sizeof(std::uint32_t)));
  handoffs = static_cast<std::uint32_t*>(backend->alloc_device(64 * sizeof(std::uint32_t)));
  std::vector<std::pair<void*, std::size_t>> spans = {{umem_area, umem_bytes}};
  if (xsk) {  // the software rings are host-mapped memory already
    spans.push_back(mapping_of(fill, sizeof(std::uint64_t)));
    spans.push_back(mapping_of(completion, sizeof(std::uint64_t)));
    spans.push_back(mapping_of(rx, sizeof(Descriptor)));
    spans.push_back(mapping_of(tx, sizeof(Descriptor)));
  }
  for (const auto& [p, n] : spans) {
    backend->register_host(p, n);
    registered.push_back(p);
  }
  worker = std::thread([this] {
    name_this_thread("gnio-eth-port");
    xsk ? wake_loop() : copy_loop();
  });
}

std::string Port::Impl::open_xdp() {
  const PortOptions& o = options;
  const XdpLibrary& lib = XdpLibrary::get();
  if (!lib.error.empty()) return lib.error;
  const std::uint32_t half = o.frames / 2;
  xsk_umem_config ucfg{};
  ucfg.fill_size = half;
  ucfg.comp_size = half;
  ucfg.frame_size = o.frame_size;
  ucfg.frame_headroom = 0;
  ucfg.flags = 0;
  if (int e = lib.umem_create(&umem, umem_area, umem_bytes, &xfill, &xcompletion, &ucfg); e != 0) {
    umem = nullptr;
    if (e == -EPERM)
      fail(ErrorClass::SystemError,
           "eth::Port: registering packet memory with AF_XDP: %s (needs CAP_NET_ADMIN and "
           "CAP_NET_RAW)",
           std::strerror(-e));
    return std::string("registering packet memory with AF_XDP failed: ") + std::strerror(-e);
  }
  struct Attempt {
    std::uint32_t xdp_flags;
    std::uint16_t bind_flags;
    const char* what;
  };
  std::vector<Attempt> attempts;
  if (o.mode != XdpMode::Skb) {
    attempts.push_back({XDP_FLAGS_DRV_MODE, XDP_ZEROCOPY, "zero copy, XDP in the driver"});
    attempts.push_back({XDP_FLAGS_DRV_MODE, XDP_COPY, "copy mode, XDP in the driver"});
  }
  if (o.mode != XdpMode::Driver)
    attempts.push_back({XDP_FLAGS_SKB_MODE, XDP_COPY, "copy mode, XDP in skb (generic) mode"});
  std::string refused;
  for (const Attempt& a : attempts) {
    xsk_socket_config scfg{};
    scfg.rx_size = half;
    scfg.tx_size = half;
    scfg.libxdp_flags = 0;
    scfg.xdp_flags = a.xdp_flags;
    scfg.bind_flags = a.bind_flags;
    int e = lib.socket_create(&xsk, o.interface.c_str(), o.queue, umem, &xrx, &xtx, &scfg);
    // A socket just closed on this queue is released by Linux a little later: busy for a moment.
    for (int retry = 0; e == -EBUSY && retry < 40; ++retry) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      e = lib.socket_create(&xsk, o.interface.c_str(), o.queue, umem, &xrx, &xtx, &scfg);
    }
    if (e == 0) {
      mode = std::string("AF_XDP, ") + a.what;
      if (!refused.empty()) mode += " (" + refused + ")";
      fill = ring_of(xfill);
      completion = ring_of(xcompletion);
      rx = ring_of(xrx);
      tx = ring_of(xtx);
      return {};
    }
    xsk = nullptr;
    if (e == -EPERM)
      fail(ErrorClass::SystemError,
           "eth::Port: AF_XDP on %s queue %u: %s (needs CAP_NET_ADMIN and CAP_NET_RAW)",
           o.interface.c_str(), o.queue, std::strerror(-e));
    refused += std::string(refused.empty() ? "" : "; ") + a.what + " refused: " + std::strerror(-e);
    if (e == -EBUSY)
      fail(ErrorClass::SystemError,
           "eth::Port: %s queue %u is busy for 2 s: another AF_XDP socket or XDP program holds it "
           "(%s)",
           o.interface.c_str(), o.queue, refused.c_str());
  }
  (void)lib.umem_delete(umem);
  umem = nullptr;
  return "no AF_XDP socket on " + o.interface + " queue " + std::to_string(o.queue) + ": " +
         refused;
}

void Port::Impl::open_packet() {
  packet_fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (packet_fd < 0) {
    if (errno == EPERM)
      fail(ErrorClass::SystemError, "eth::Port: an AF_PACKET socket needs CAP_NET_RAW");
    fail_errno("eth::Port: AF_PACKET socket");
  }
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(ETH_P_ALL);
  at.sll_ifindex = ifindex;
  if (::bind(packet_fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0)
    fail_errno("eth::Port: binding an AF_PACKET socket to %s", options.interface.c_str());
  const int one = 1;  // not our own transmissions back as receptions (Linux 4.20+)
  (void)::setsockopt(packet_fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
  // The socket buffers what arrives while the copying thread is descheduled; Linux's default
  // (about 200 KiB: some 300 small frames) drops bursts on a loaded machine. Room for two rings
  // of full frames, past rmem_max where CAP_NET_ADMIN allows.
  const int buffer_bytes = static_cast<int>(
      std::min<std::size_t>(std::size_t{options.frames} * options.frame_size * 2, 64u << 20));
  if (::setsockopt(packet_fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer_bytes, sizeof(buffer_bytes)) != 0)
    (void)::setsockopt(packet_fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  // Four rings in one host-mapped block, each: producer and consumer on lines of their own, then
  // the entries (the layout kernels expect from AF_XDP).
  const std::uint32_t entries = options.frames / 2;
  const std::size_t ring_bytes = 128 + std::size_t{entries} * sizeof(Descriptor);
  soft_rings = backend->alloc_host_mapped(4 * ring_bytes);
  auto ring_at = [&](int k) {
    auto* base = static_cast<std::uint8_t*>(soft_rings) + k * ring_bytes;
    return Ring{reinterpret_cast<std::uint32_t*>(base), reinterpret_cast<std::uint32_t*>(base + 64),
                base + 128, entries - 1};
  };
  fill = ring_at(0);
  completion = ring_at(1);
  rx = ring_at(2);
  tx = ring_at(3);
}

void Port::Impl::wake_loop() {
  const int fd = XdpLibrary::get().socket_fd(xsk);
  Idler idler(backend->kind());
  while (!quit.load(std::memory_order_acquire)) {
    // Copy mode transmits only inside sendto(), a batch per call: kick while the TX ring holds
    // frames Linux has not taken.
    if (load_acquire(tx.producer) != load_acquire(tx.consumer)) {
      idler.worked();
      wakeups.fetch_add(1, std::memory_order_relaxed);
      if (::sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN &&
          errno != EBUSY && errno != ENOBUFS && errno != ENETDOWN) {
        GNIO_WARN(Eth, "eth::Port %s: sendto failed: %s", options.interface.c_str(),
                  std::strerror(errno));
      }
      continue;
    }
    idler.idle();
  }
}

void Port::Impl::copy_loop() {
  Idler idler(backend->kind());
  const std::uint32_t frame = options.frame_size;
  auto* fill_addrs = static_cast<std::uint64_t*>(fill.entries);
  auto* done_addrs = static_cast<std::uint64_t*>(completion.entries);
  auto* rx_descs = static_cast<Descriptor*>(rx.entries);
  auto* tx_descs = static_cast<Descriptor*>(tx.entries);
  while (!quit.load(std::memory_order_acquire)) {
    bool work = false;
    // Receive into the fill ring's frames while both the socket and the fill ring have some and
    // the RX ring has room.
    for (int n = 0; n < 64; ++n) {
      const std::uint32_t fc = *fill.consumer, rp = *rx.producer;
      if (fc == load_acquire(fill.producer) || rp - load_acquire(rx.consumer) > rx.mask) break;
      const std::uint64_t addr = fill_addrs[fc & fill.mask];
      const ssize_t got = ::recv(packet_fd, umem_area + addr, frame, MSG_DONTWAIT | MSG_TRUNC);
      if (got < 0) break;
      work = true;
      if (got > static_cast<ssize_t>(frame)) continue;  // longer than a frame: dropped
      rx_descs[rp & rx.mask] = Descriptor{addr, static_cast<std::uint32_t>(got), 0};
      store_release(fill.consumer, fc + 1);
      store_release(rx.producer, rp + 1);
    }
    // Send what the TX ring holds; each sent frame goes to the completion ring.
    for (int n = 0; n < 64; ++n) {
      const std::uint32_t tc = *tx.consumer, cp = *completion.producer;
      if (tc == load_acquire(tx.producer)) break;
      const Descriptor d = tx_descs[tc & tx.mask];
      if (d.len > 0 && d.len <= frame && d.addr + d.len <= umem_bytes &&
          ::send(packet_fd, umem_area + d.addr, d.len, MSG_DONTWAIT) < 0 &&
          (errno == EAGAIN || errno == ENOBUFS))
        break;  // the socket is full: try again next turn
      work = true;
      wakeups.fetch_add(1, std::memory_order_relaxed);
      done_addrs[cp & completion.mask] = d.addr;
      store_release(tx.consumer, tc + 1);
      store_release(completion.producer, cp + 1);
    }
    if (work)
      idler.worked();
    else
      idler.idle();
  }
}

void Port::Impl::close() noexcept {
  if (words) store_release(&words[0], 1u);
  quit.store(true, std::memory_order_release);
  if (worker.joinable()) worker.join();
  for (void* p : registered) backend->unregister_host(p);
  registered.clear();
  if (xsk || umem) {
    const XdpLibrary& lib = XdpLibrary::get();
    if (xsk) lib.socket_delete(xsk);  // detaches the XDP program too
    if (umem) (void)lib.umem_delete(umem);
  }
  xsk = nullptr;
  umem = nullptr;
  if (packet_fd >= 0) ::close(packet_fd);
  packet_fd = -1;
  if (soft_rings) backend->free_host_mapped(soft_rings);
  soft_rings = nullptr;
  if (umem_area) ::munmap(umem_area, umem_bytes);
  umem_area = nullptr;
  if (words) backend->free_host_mapped(words);
  words = nullptr;
  if (handoffs) backend->free_device(handoffs);
  handoffs = nullptr;
}

Port::Port(Comm& comm, const PortOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->comm.emplace(comm);
  impl_->backend = &gnio::detail::CommServices(comm).backend();
  impl_->options = options;
  impl_->open();
  GNIO_INFO(Eth, "eth::Port %s queue %u: %s; %u frames of %u bytes", options.interface.c_str(),
            options.queue, impl_->mode.c_str(), options.frames, options.frame_size);
}

Port::~Port() = default;

RxQueue Port::rx() const {
  const Impl& m = *impl_;
  RxQueue q = m.queue_side<RxQueue>(Impl::kRxHandoff);
  q.rx = m.rx;
  q.fill = m.fill;
  return q;
}

TxQueue Port::tx() const {
  const Impl& m = *impl_;
  TxQueue q = m.queue_side<TxQueue>(Impl::kTxHandoff);
  q.tx = m.tx;
  q.completion = m.completion;
  q.first_frame = static_cast<std::uint64_t>(m.options.frames / 2) * m.options.frame_size;
  q.frame_size = m.options.frame_size;
  q.frames = m.options.frames / 2;
  return q;
}

std::string Port::mode() const {
  return impl_->mode;
}

void Port::stop() {
  __atomic_store_n(&impl_->words[0], 1u, __ATOMIC_RELEASE);
}

PortStats Port::stats() const {
  const Impl& m = *impl_;
  xdp_statistics x{};  // AF_XDP's counters; all zero on a packet socket or when the read fails
  std::uint64_t packet_drops = 0;
  if (m.xsk) {
    socklen_t len = sizeof(x);
    if (::getsockopt(XdpLibrary::get().socket_fd(m.xsk), SOL_XDP, XDP_STATISTICS, &x, &len) != 0)
      x = {};
  } else if (m.packet_fd >= 0) {
    tpacket_stats t{};  // counts since the last read: the port's figures are totals, so add up
    socklen_t len = sizeof(t);
    if (::getsockopt(m.packet_fd, SOL_PACKET, PACKET_STATISTICS, &t, &len) == 0)
      packet_drops = m.packet_drops.fetch_add(t.tp_drops, std::memory_order_relaxed) + t.tp_drops;
    else
      packet_drops = m.packet_drops.load(std::memory_order_relaxed);
  }
  // Every field, in PortStats' order.
  return PortStats{.received = load_acquire(m.rx.consumer),
                   .sent = load_acquire(m.completion.producer),
                   .rx_dropped = m.xsk ? x.rx_dropped : packet_drops,
                   .rx_invalid = x.rx_invalid_descs,
                   .rx_ring_full = x.rx_ring_full,
                   .rx_fill_empty = x.rx_fill_ring_empty_descs,
                   .tx_invalid = x.tx_invalid_descs,
                   .tx_ring_empty = x.tx_ring_empty_descs,
                   .wakeups = m.wakeups.load(std::memory_order_relaxed)};
}

const std::uint8_t* Port::mac() const {
  return impl_->mac;
}

int Port::ifindex() const {
  return impl_->ifindex;
}

}  // namespace gnio::eth
