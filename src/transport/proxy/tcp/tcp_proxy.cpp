#include "transport/proxy/tcp/tcp_proxy.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include "base/deadline.hpp"
#include "base/fail.hpp"
#include "gnio/config.hpp"
#include "gnio/device/atomic.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/word_ops.hpp"
#include "gnio/log.hpp"
#include "platform/word_op.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/tcp/tcp_proxy_class.hpp"

namespace gnio::proxy {
namespace {

/// Frames a receiving thread takes from one connection before it looks at the others.
constexpr int kFramesPerTurn = 64;

/// Connections per pair a rank of this backend prefers when GNIO_NET_NSOCKS is 0 (the mesh takes
/// the smallest preference of the job's ranks). On GPUs a large put is striped over the
/// connections past the first, and each lane's threads stage their own chunks through the copy
/// engines, so more lanes keep more of both in flight: a 64 MiB put from one H100 as 2 nodes
/// moved 8.4 / 10.9 / 12.5 GB/s over 4 / 5 / 8 (bench/results/2026-12-07f-gpu). The host
/// backend's ranks share a few cores with the proxy's threads: it keeps the 4 it has always had.
constexpr int kGpuLanes = 8;
constexpr int kHostLanes = 4;

/// GNIO_NET_NSOCKS, checked, with this backend's preference for 0.
net::TcpMesh::LaneRequest net_lanes(platform::BackendKind backend) {
  const long long n = config_int("GNIO_NET_NSOCKS");
  GNIO_REQUIRE(n >= 0 && n <= 16, "GNIO_NET_NSOCKS=%lld is not 0 (auto) or in [1, 16]", n);
  return {static_cast<int>(n), backend == platform::BackendKind::Host ? kHostLanes : kGpuLanes};
}

/// GNIO_NET_CONNECT.
net::TcpMesh::Connect net_connect() {
  return config_text("GNIO_NET_CONNECT") == "eager" ? net::TcpMesh::Connect::AtCreation
                                                    : net::TcpMesh::Connect::OnFirstUse;
}

}  // namespace

TcpProxy::TcpProxy(const ProxyArgs& args)
    : Proxy(args),
      mesh_(args.bootstrap, args.node_of_rank, args.timeout_s, net_lanes(backend_.kind()),
            net_connect()) {
  // The host backend's proxy addresses every byte itself; GPU memory goes through bounce buffers
  // (GNIO_PROXY_STAGING=always stages on the host backend too, which is how CI tests that path).
  direct_ = backend_.kind() == platform::BackendKind::Host && !staging_forced();
  chunk_ = config_size("GNIO_PROXY_CHUNK");
  // A put of no data has nothing to split.
  stripe_min_ = std::max<std::uint64_t>(1, config_size("GNIO_NET_STRIPE_MIN"));
  lanes_ = mesh_.lanes();
  const std::size_t connections = mesh_.connections();
  applied_ = std::make_unique<std::atomic<std::uint64_t>[]>(connections);
  peer_acked_ = std::make_unique<std::atomic<std::uint64_t>[]>(connections);
  said_bye_ = std::make_unique<std::atomic<bool>[]>(connections);
  for (std::size_t i = 0; i < connections; ++i) {
    applied_[i] = 0;
    peer_acked_[i] = 0;
    said_bye_[i] = false;
  }
  readers_.resize(connections);
  for (auto& r : readers_) r = std::make_unique<net::SocketReader>();
  lane_.resize(static_cast<std::size_t>(lanes_));
  for (int l = 0; l < lanes_; ++l) lane_[l] = std::make_unique<Lane>();
  // Lane 0's stagings serve every operation; the other lanes make theirs when a striped put
  // first reaches them (collectives' frames need none).
  lane_[0]->outbound = staging_for(Staging::Direction::Outbound);
  lane_[0]->inbound = staging_for(Staging::Direction::Inbound);
  sender_ = std::thread([this] { run_guarded("sender", [this] { send_loop(); }); });
  receiver_ = std::thread([this] { run_guarded("receiver", [this] { receive_loop(0); }); });
  for (int l = 1; l < lanes_; ++l) {
    lane_[l]->sender =
        std::thread([this, l] { run_guarded("lane sender", [this, l] { lane_send_loop(l); }); });
    lane_[l]->receiver =
        std::thread([this, l] { run_guarded("lane receiver", [this, l] { receive_loop(l); }); });
  }
}

TcpProxy::~TcpProxy() {
  stop_.store(true, std::memory_order_release);
  ring_doorbell();
  for (int l = 1; l < lanes_; ++l) {
    std::lock_guard<std::mutex> lock(lane_[l]->mutex);
    lane_[l]->wake.notify_all();
  }
  if (sender_.joinable()) sender_.join();
  for (int l = 1; l < lanes_; ++l)
    if (lane_[l]->sender.joinable()) lane_[l]->sender.join();
  if (receiver_.joinable()) receiver_.join();
  for (int l = 1; l < lanes_; ++l)
    if (lane_[l]->receiver.joinable()) lane_[l]->receiver.join();
  for (int l = 0; l < lanes_; ++l) {
    Lane& ln = *lane_[l];
    if (stats())
      std::fprintf(stderr, "gnio proxy stats, rank %d, connection %d: %s; %s; %s\n", rank_, l,
                   ln.send_time.describe("send").c_str(),
                   ln.receive_time.describe("receive").c_str(),
                   ln.deliver_time.describe("deliver").c_str());
    ln.outbound.reset();
    ln.inbound.reset();
  }
}

std::unique_ptr<Staging> TcpProxy::staging_for(Staging::Direction direction) const {
  return std::make_unique<Staging>(backend_, direction, direct_, chunk_);
}

void TcpProxy::StageTime::add(Clock::duration d) {
  const auto ns =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  ++n;
  total_ns += ns;
  max_ns = std::max(max_ns, ns);
}

std::string TcpProxy::StageTime::describe(const char* name) const {
  return format("%s %llu x mean %.1f us max %.1f us", name, static_cast<unsigned long long>(n),
                n ? static_cast<double>(total_ns) / static_cast<double>(n) / 1e3 : 0.0,
                static_cast<double>(max_ns) / 1e3);
}

bool TcpProxy::striping(const ProxyDesc& d, std::uint32_t unanswered) const {
  const bool data = d.op == static_cast<std::uint32_t>(ProxyOp::Put) ||
                    d.op == static_cast<std::uint32_t>(ProxyOp::PutSignal);
  const bool inline_data = data && (d.flags & kProxyInline) != 0 && d.bytes <= kProxyInlineBytes;
  const bool host_source = data && (d.flags & kProxyHostSource) != 0;
  return lanes_ > 1 && data && (d.flags >> kProxyRegionShift) == 0 && !inline_data &&
         !host_source && d.bytes >= stripe_min_ && unanswered == 0;
}

int TcpProxy::lane_of(std::uint64_t sig_offset) const {
  // A multiplicative hash of the word's index: the pipes' words are evenly spaced, which a plain
  // modulo can fold onto a few lanes.
  const std::uint64_t h = (sig_offset / 8) * 0x9E3779B97F4A7C15ull;
  return 1 + static_cast<int>((h >> 32) % static_cast<std::uint64_t>(lanes_ - 1));
}

bool TcpProxy::transmit(int peer, int lane, Staging& staging, const void* head,
                        std::size_t head_bytes, const void* data, std::size_t bytes) {
  // A frame can make the peer answer with data this rank's receiver writes into memory that
  // device code read before it posted the frame's descriptor (a ring message's slot, freed by
  // the tail signal this frame carries). Device code -> this thread is ordered by the ring
  // slot's sequence word; this release, acquired by the receiver before it writes anything,
  // carries that order on to the receiver thread (the network round trip orders it in time
  // only, which the memory model does not count).
  frames_sending_.fetch_add(1, std::memory_order_release);
  int err = 0;
  // The first frame to a peer on a lane opens the connection (GNIO_NET_CONNECT=lazy): a peer
  // that died before it is reported here, by name.
  const int fd = mesh_.send_fd(peer, lane, &err);
  if (fd < 0) {
    if (!stop_.load(std::memory_order_acquire))
      fail_transport(format("rank %d: tcp transport: could not connect to rank %d on connection "
                            "%d (%s); that rank died or cannot be reached",
                            rank_, peer, lane, std::strerror(err)),
                     peer);
    return false;
  }
  if (staging.send(fd, head, head_bytes, data, bytes, Deadline::no_progress_for(timeout_s_),
                   &err) != bootstrap::IoStatus::Ok) {
    if (!stop_.load(std::memory_order_acquire))
      fail_transport(format("rank %d: tcp transport: sending to rank %d on connection %d failed "
                            "(%s); that rank failed or rejected an operation (see its log)",
                            rank_, peer, lane, err ? std::strerror(err) : "timeout"),
                     peer);
    return false;
  }
  // Released after the data was read: see frames_sent_.
  frames_sent_.fetch_add(1, std::memory_order_release);
  return true;
}

void TcpProxy::lane_send_loop(int lane) {
  Lane& l = *lane_[static_cast<std::size_t>(lane)];
  Staging direct_staging(backend_, Staging::Direction::Outbound, true, 0);
  std::uint64_t taken = 0;
  auto last_work = Clock::now();
  for (;;) {
    if (l.queued.load(std::memory_order_acquire) == taken) {
      // Nothing handed: poll within the spin window, then sleep until the sender hands a frame
      // (it notifies) or the proxy stops. Frames handed before the stop are sent first.
      if (stop_.load(std::memory_order_acquire)) break;
      if (Clock::now() - last_work < spin()) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock<std::mutex> lock(l.mutex);
      l.wake.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return l.queued.load(std::memory_order_relaxed) != taken ||
               stop_.load(std::memory_order_acquire);
      });
      continue;
    }
    LaneFrame lf;
    {
      std::lock_guard<std::mutex> lock(l.mutex);
      lf = l.queue.front();
      l.queue.pop_front();
    }
    ++taken;
    if (!failed()) {
      if (lf.staged && !l.outbound) l.outbound = staging_for(Staging::Direction::Outbound);
      (void)transmit(lf.peer, lane, lf.staged ? *l.outbound : direct_staging, &lf.frame,
                     sizeof(lf.frame), lf.data, static_cast<std::size_t>(lf.bytes));
      if (stats()) l.send_time.add(Clock::now() - lf.seen);
    }
    // Sent (or never will be, after a failure): the ring's head may pass the frame's ticket.
    l.sent.fetch_add(1, std::memory_order_release);
    nudge_sender();
    last_work = Clock::now();
  }
  if (!failed())
    for (int p : mesh_.peers()) {
      if (!mesh_.sending_to(p, lane)) continue;  // never opened: nothing to close in order
      const Frame bye = bye_frame(token_);
      (void)transmit(p, lane, direct_staging, &bye, sizeof(bye), nullptr, 0);
    }
}

void TcpProxy::receive_loop(int lane) {
  Lane& ln = *lane_[static_cast<std::size_t>(lane)];
  // The peers whose connection on this lane is up: all of them when connected at creation
  // (until each says goodbye); otherwise those that connected, as lane 0's thread accepts them
  // (it hands the other lanes theirs).
  const bool at_creation = mesh_.connected_at_creation();
  std::vector<int> open = at_creation ? mesh_.peers() : std::vector<int>{};
  std::vector<pollfd> pfds;
  auto last_work = std::chrono::steady_clock::now();
  bool arrivals = !at_creation;  // the listener (lane 0) or the hand-over (others) has news
  // Lane 0, connections on first use: this rank's sending sockets, watched for the peer closing
  // them (see TcpMesh), each with the bytes of a goodbye read so far.
  struct Watched {
    net::TcpMesh::Accepted c;
    Frame bye;
    std::size_t have;
  };
  std::vector<Watched> watched;
  bool opened = lane == 0 && !at_creation;
  while (!stop_.load(std::memory_order_acquire) && (!at_creation || !open.empty())) {
    settle_deliveries(lane);
    if (arrivals) {
      arrivals = false;
      if (lane == 0) {
        for (const net::TcpMesh::Accepted& a : mesh_.accept_ready()) {
          if (a.lane == 0) {
            open.push_back(a.peer);
            continue;
          }
          Lane& to = *lane_[static_cast<std::size_t>(a.lane)];
          {
            std::lock_guard<std::mutex> lock(to.mutex);
            to.arrived.push_back(a.peer);
          }
          to.arrivals.notify();
        }
      } else {
        ln.arrivals.drain();
        std::lock_guard<std::mutex> lock(ln.mutex);
        open.insert(open.end(), ln.arrived.begin(), ln.arrived.end());
        ln.arrived.clear();
      }
    }
    if (opened) {
      for (const net::TcpMesh::Accepted& c : mesh_.take_opened())
        watched.push_back(Watched{c, Frame{}, 0});
      opened = false;
    }
    pfds.clear();
    for (int p : open) pfds.push_back(pollfd{mesh_.receive_fd(p, lane), POLLIN, 0});
    const std::size_t connections = pfds.size();
    if (!at_creation) {
      if (lane == 0) {
        for (const Watched& w : watched)
          pfds.push_back(pollfd{mesh_.watched_fd(w.c.peer, w.c.lane), POLLIN, 0});
        pfds.push_back(pollfd{mesh_.opened_fd(), POLLIN, 0});
        mesh_.add_accept_fds(pfds);
      } else {
        pfds.push_back(pollfd{ln.arrivals.fd(), POLLIN, 0});
      }
    }
    const std::size_t first_accept =
        connections + (lane == 0 && !at_creation ? watched.size() + 1 : 0);
    // A connection whose reader already holds bytes has a frame (or its start) to take without
    // asking the socket.
    bool held = false;
    for (int p : open) held = held || readers_[at(p, lane)]->buffered() > 0;
    // Without blocking while a reader holds bytes or deliveries are in flight (their completion
    // is polled here) and within the spin window after the last frame; otherwise blocking, 50 ms
    // at a time so that stop_ is looked at.
    const auto now = std::chrono::steady_clock::now();
    // (While the delivery agent runs, too: idle() stops it at the end of its spell.)
    const bool polling = held || !ln.delivering.empty() || now - last_work < spin() ||
                         (ln.inbound && ln.inbound->agent_running());
    const int n = ::poll(pfds.data(), pfds.size(), polling ? 0 : 50);
    if (n < 0 || (n == 0 && !held)) {  // nothing, or EINTR
      if (ln.inbound) ln.inbound->idle();
      if (polling) std::this_thread::yield();
      continue;
    }
    last_work = now;
    if (lane == 0 && !at_creation) {
      opened = pfds[first_accept - 1].revents != 0;
      std::vector<Watched> still_watched;
      for (std::size_t w = 0; w < watched.size(); ++w) {
        if (pfds[connections + w].revents == 0 ||
            !sending_socket_closed(watched[w].c, &watched[w].bye, &watched[w].have))
          still_watched.push_back(watched[w]);
      }
      watched.swap(still_watched);
    }
    for (std::size_t i = first_accept; i < pfds.size(); ++i) arrivals = arrivals || pfds[i].revents;
    std::vector<int> still_open;
    for (std::size_t i = 0; i < connections; ++i) {
      net::SocketReader& reader = *readers_[at(open[i], lane)];
      bool open_still = true;
      if (pfds[i].revents != 0 || reader.buffered() > 0) {
        // Every whole frame the reader holds, then the one the socket has begun (a burst of
        // small frames costs one recv); a bounded number, so the other peers get their turn.
        int frames = 0;
        do {
          open_still = receive_frame(open[i], lane);
        } while (open_still && ++frames < kFramesPerTurn && reader.buffered() >= sizeof(Frame));
      }
      if (open_still) still_open.push_back(open[i]);
    }
    // The small deliveries of this turn's frames go to the device together.
    if (ln.inbound) ln.inbound->flush();
    open.swap(still_open);
  }
  // Connections on first use: the peers watch the sockets this thread received on; a goodbye
  // tells them this rank stops receiving in order (best effort: they are stopping too).
  if (!at_creation && !failed())
    for (int p : open) {
      const Frame bye = bye_frame(token_);
      (void)::send(mesh_.receive_fd(p, lane), &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

bool TcpProxy::sending_socket_closed(const net::TcpMesh::Accepted& c, Frame* bye,
                                     std::size_t* have) {
  const int fd = mesh_.watched_fd(c.peer, c.lane);
  for (;;) {
    const ssize_t n =
        ::recv(fd, reinterpret_cast<char*>(bye) + *have, sizeof(Frame) - *have, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n > 0) {
      *have += static_cast<std::size_t>(n);
      if (*have < sizeof(Frame)) continue;
      if (check_frame(*bye, token_, 0, 0).kind == FrameKind::Bye)
        return true;  // the peer stops receiving in order
    }
    // Closed, reset, or bytes that are not a goodbye: the peer dropped this connection.
    if (!stop_.load(std::memory_order_acquire))
      fail_transport(format("rank %d: tcp transport: the connection to rank %d ended (closed by "
                            "that rank, connection %d); that rank failed or rejected an "
                            "operation (see its log)",
                            rank_, c.peer, c.lane),
                     c.peer);
    return true;
  }
}

void TcpProxy::take_receiving_on(std::vector<std::size_t>& known) {
  if (receiving_count_.load(std::memory_order_acquire) == known.size()) return;
  std::lock_guard<std::mutex> lock(receiving_mutex_);
  known.insert(known.end(), receiving_on_.begin() + static_cast<std::ptrdiff_t>(known.size()),
               receiving_on_.end());
}

void TcpProxy::settle_deliveries(int lane) {
  Lane& ln = *lane_[static_cast<std::size_t>(lane)];
  if (ln.delivering.empty()) return;
  // A lane without staging has only landing frames, in place once received.
  const std::uint64_t done = ln.inbound ? ln.inbound->completed() : ~std::uint64_t{0};
  bool any = false;
  while (!ln.delivering.empty() && ln.delivering.front().mark <= done) {
    const std::size_t c = at(ln.delivering.front().peer, lane);
    if (applied_[c].fetch_add(1, std::memory_order_release) == 0) {
      std::lock_guard<std::mutex> lock(receiving_mutex_);
      receiving_on_.push_back(c);
      receiving_count_.store(receiving_on_.size(), std::memory_order_release);
    }
    if (stats()) ln.deliver_time.add(Clock::now() - ln.delivering.front().queued);
    ln.delivering.pop_front();
    any = true;
  }
  if (any) nudge_sender();  // it owes those peers acks
}

bool TcpProxy::receive_frame(int peer, int lane) {
  const int fd = mesh_.receive_fd(peer, lane);
  Lane& ln = *lane_[static_cast<std::size_t>(lane)];
  const Deadline deadline = Deadline::no_progress_for(timeout_s_);
  Frame f{};
  int err = 0;
  net::SocketReader& reader = *readers_[at(peer, lane)];
  const bootstrap::IoStatus st = reader.read(fd, &f, sizeof(f), deadline, &err);
  if (st != bootstrap::IoStatus::Ok) {
    if (!said_bye_[at(peer, lane)].load() && !stop_.load(std::memory_order_acquire))
      fail_transport(
          format("rank %d: tcp transport: the connection from rank %d ended (%s); that "
                 "rank failed or rejected an operation (see its log)",
                 rank_, peer, st == bootstrap::IoStatus::Closed ? "closed" : std::strerror(err)),
          peer);
    return false;
  }
  // The frame is here, so whatever this rank sent that it answers was sent (and its source read):
  // see send_frame and frames_sent_.
  (void)frames_sending_.load(std::memory_order_acquire);
  (void)frames_sent_.load(std::memory_order_acquire);
  // Nothing of a frame that fails a check is written; the connection is closed so the sender
  // learns of it, and the communicator aborts.
  auto reject = [&](const char* why) {
    fail_transport(format(
        "rank %d: tcp transport rejected a frame from rank %d: %s (type %u, "
        "offset 0x%llx, %llu bytes, signal offset 0x%llx; heap holds %llu "
        "bytes); nothing was written and the connection is closed",
        rank_, peer, why, f.type, static_cast<unsigned long long>(f.dst_offset),
        static_cast<unsigned long long>(f.bytes), static_cast<unsigned long long>(f.sig_offset),
        static_cast<unsigned long long>(heap_bytes_.load())));
    ::shutdown(fd, SHUT_RDWR);
    return false;
  };
  const Clock::time_point arrived = stats() ? Clock::now() : Clock::time_point{};
  const Landing* land = f.region ? landing(f.region) : nullptr;
  const FrameVerdict v = check_frame(f, token_, heap_bytes_.load(std::memory_order_acquire),
                                     land ? land->inbox_bytes : 0);
  // Lanes past the first carry landing-region frames and the pieces of striped puts (data
  // without a signal) only: the sender keeps everything else on lane 0, where its order with the
  // other operations holds.
  if (lane > 0 && v.kind != FrameKind::Invalid && v.kind != FrameKind::Bye &&
      !(f.region != 0 && (v.has_data() || v.has_signal())) &&
      !(f.region == 0 && v.kind == FrameKind::Put))
    return reject("a frame other than a landing region's or a put piece on a lane");
  switch (v.kind) {
    case FrameKind::Invalid: return reject(v.why);
    case FrameKind::Bye: said_bye_[at(peer, lane)].store(true); return false;
    case FrameKind::Ack:
      if (f.region >= static_cast<std::uint32_t>(lanes_))
        return reject("an ack for a connection that does not exist");
      peer_acked_[at(peer, static_cast<int>(f.region))].store(f.count, std::memory_order_release);
      nudge_sender();
      return true;
    default: break;
  }
  // The receiver never waits for this rank's sender: the sender may be inside a put to this very
  // peer that only this thread's reading lets finish, while the peer's receiver waits the same
  // way (gets and atomics both ways while large puts cross). Nor does it need to: a frame the
  // asker sent after a reply of ours arrived was sent after that reply's data left this rank's
  // heap (send_all reads the data before it returns, and under ThreadSanitizer records the read
  // and releases the network order before the system call; a staged reply is copied out first).
  if (v.kind == FrameKind::Get || v.kind == FrameKind::Atomic) {
    // The puts this peer sent before are in place before a get reads (or an atomic updates)
    // what they wrote.
    if (!ln.inbound->settle(deadline)) {
      fail_transport(
          format("rank %d: proxy: the data of earlier puts did not land within %.0f s "
                 "(the GPU did not run the proxy's copies)",
                 rank_, timeout_s_));
      return false;
    }
    // Answered by this rank's sender; not counted in applied_ (the requester finishes these by
    // their reply, not by acks).
    Frame reply{kFrameMagic, kFrameGetReply, token_, f.dst_offset, f.bytes, 0, 0, 0, 0, f.count};
    if (v.kind == FrameKind::Atomic) {
      reply.type = kFrameAtomicReply;
      reply.value = apply_atomic(f);
    }
    {
      std::lock_guard<std::mutex> lock(replies_mutex_);
      replies_.push_back(Reply{peer, reply});
    }
    nudge_sender();
    return true;
  }
  if (v.is_reply()) {
    const bool get = v.kind == FrameKind::GetReply;
    const std::optional<OpenRequest> asked = requests_.take(
        f.count, 0, peer, get ? RequestKind::Get : RequestKind::Update, get ? f.bytes : 0);
    if (!asked)
      return reject(get ? "a get reply that answers no open get of this rank (of that size)"
                        : "an atomic reply that answers no open atomic of this rank");
    const std::uint64_t addr = asked->where;
    if (get) {
      // The asker's ticket is done (and its device reads the data) only once it is in place.
      std::uint64_t mark = 0;
      if (ln.inbound->receive(reader, fd, reinterpret_cast<char*>(addr), f.bytes, nullptr, deadline,
                              &err, &mark) != bootstrap::IoStatus::Ok ||
          !ln.inbound->settle(deadline)) {
        fail_transport(
            format("rank %d: tcp transport: the data of a get from rank %d did not "
                   "arrive (%s)",
                   rank_, peer, err ? std::strerror(err) : "timeout or closed"));
        return false;
      }
    } else if (addr && !deliver_result(f.count, f.value)) {
      return false;
    }
    requests_.answered(f.count, peer);
    nudge_sender();
    return true;
  }
  // Data, then the signal after it with release order (a rank that sees the new signal value also
  // sees the data); the peer's ack waits until both are in place (settle_deliveries).
  bootstrap::IoStatus io = bootstrap::IoStatus::Ok;
  // A lane past the first makes its staging at its first put piece.
  if (!land && !ln.inbound) ln.inbound = staging_for(Staging::Direction::Inbound);
  std::uint64_t mark = ln.inbound ? ln.inbound->issued() : 0;
  if (land) {
    // A landing inbox is host memory: the data straight from the socket, then the signal, no GPU
    // work. Acked in order with this peer's earlier frames: once the deliveries queued before it
    // landed too (the mark issued last).
    if (v.has_data() && f.bytes > 0)
      io = reader.read(fd, land->inbox + f.dst_offset, f.bytes, deadline, &err);
    if (io == bootstrap::IoStatus::Ok && v.has_signal())
      (void)platform::apply_word_op(land->inbox + f.sig_offset, sizeof(std::uint64_t),
                                    signal_word_op(f.sig_op), f.value, 0, dev::Order::AcqRel);
  } else {
    const Staging::Signal signal{reinterpret_cast<std::uint64_t*>(heap_base_ + f.sig_offset),
                                 signal_word_op(f.sig_op), f.value};
    io = ln.inbound->receive(reader, fd, heap_base_ + f.dst_offset, v.has_data() ? f.bytes : 0,
                             v.has_signal() ? &signal : nullptr, deadline, &err, &mark);
  }
  if (io != bootstrap::IoStatus::Ok) {
    fail_transport(
        format("rank %d: tcp transport: the data of a put from rank %d did not arrive "
               "(%s)",
               rank_, peer, err ? std::strerror(err) : "timeout or closed"));
    return false;
  }
  const Clock::time_point queued = stats() ? Clock::now() : Clock::time_point{};
  if (stats()) ln.receive_time.add(queued - arrived);
  ln.delivering.push_back(Delivering{mark, peer, queued});
  settle_deliveries(lane);
  return true;
}

void TcpProxy::nudge_sender() {
  // Before the doorbell: the sender's last look before it sleeps sees the flag, or it is asleep
  // and the doorbell wakes it.
  nudged_.store(true, std::memory_order_seq_cst);
  ring_doorbell();
}

std::uint64_t TcpProxy::apply_atomic(const Frame& f) {
  return lane_[0]->inbound->word_atomic(heap_base_ + f.dst_offset, static_cast<unsigned>(f.bytes),
                                        word_op_of(static_cast<AtomicOp>(f.sig_op)), f.value,
                                        f.sig_offset);
}

std::unique_ptr<Proxy> make_tcp_proxy(const ProxyArgs& args) {
  return std::make_unique<TcpProxy>(args);
}

}  // namespace gnio::proxy
