// The UCX proxy (see ucx_proxy.hpp). Built only with UCX (GNIO_HAVE_UCX).
#include "transport/proxy/ucx_proxy.hpp"

#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/fail.hpp"
#include "bootstrap/socket.hpp"
#include "gnio/config.hpp"
#include "gnio/device/atomic.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/word_ops.hpp"
#include "gnio/log.hpp"
#include "platform/word_op.hpp"
#include "transport/net/ucx/ucx_mesh.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/staging.hpp"

namespace gnio::proxy {
namespace {

class UcxProxy final : public Proxy {
 public:
  UcxProxy(platform::Backend& backend, Bootstrap& bs, const std::vector<int>& node_of_rank,
           char* heap_base, std::uint64_t heap_bytes, DeviceControl* control, StreamRef stream,
           double timeout_s, std::function<void(int)> on_link_lost);
  /// Stops the proxy thread, waits (through the bootstrap, unless the communicator aborted) until
  /// every rank stopped its own, then closes the endpoints: none is then taken for a failure.
  ~UcxProxy() override;

  void set_heap_bytes(std::uint64_t bytes) override;

 private:
  /// What a request message asks of the target's proxy thread, which carries it out on its heap
  /// itself: a word operation (signals and atomics when word_ops_am_), or, when staged_, a put
  /// of the message's data (and its signal, after the data) or a get (the answer brings the
  /// data).
  enum class Ask : std::uint32_t { Word, Put, Get };
  /// A request message, and the answer the target sends back once it took effect. Plain data:
  /// every rank runs the same build.
  struct WordRequest {
    std::uint64_t token = 0;  ///< the job's token (a stray message is refused)
    std::uint64_t ticket = 0;
    std::uint64_t offset = 0;      ///< of the word (Put, Get: the data) in the target's heap
    std::uint64_t bytes = 0;       ///< Put, Get: data bytes (Put: the message's payload)
    std::uint64_t sig_offset = 0;  ///< Put with `signal`: the signal word
    std::uint64_t operand = 0;     ///< Put: the signal's operand
    std::uint64_t expected = 0;
    std::int32_t from = -1;
    std::uint32_t ask = 0;  ///< Ask
    std::uint32_t op = 0;   ///< platform::WordOp (Put: the signal's)
    std::uint32_t width = 0;
    std::uint32_t signal = 0;  ///< Put: 1 = then apply `op` with `operand` to `sig_offset`
    std::uint32_t region = 0;  ///< Word: 0 = the heap, n = landing region n (Put, Get: 0)
  };
  struct WordReply {
    std::uint64_t token = 0;
    std::uint64_t ticket = 0;
    std::uint64_t old = 0;
    std::uint64_t offset = 0;  ///< the request's: which chunk of a staged put or get it answers
    std::int32_t from = -1;
    std::uint32_t pad = 0;
  };
  /// A message as received: its header and its payload (a put's data, a get's answer).
  template <class Header>
  struct Received {
    Header header;
    std::vector<char> data;
  };
  /// Tells a peer that this rank's transport failed: UCX keeps the endpoints up, so without it a
  /// peer would learn only from its own timeouts (tcp: the closed connection tells).
  struct Ended {
    std::uint64_t token = 0;
    std::int32_t from = -1;
    std::int32_t lost = -1;  ///< the rank whose lost link failed it (-1: none); the data: why
  };
  static constexpr unsigned kWordRequestMessage = 0x47;
  static constexpr unsigned kWordReplyMessage = 0x48;
  static constexpr unsigned kEndedMessage = 0x49;

  /// One ticket taken from the ring, until it is done. Lives in tickets_ (a deque: UCX's
  /// completion callbacks hold its address).
  struct Ticket {
    UcxProxy* proxy = nullptr;
    std::uint64_t number = 0;
    int peer = -1;
    std::uint32_t pending = 0;         ///< UCX requests not completed yet
    std::uint32_t source_pending = 0;  ///< of those, puts that may still read their source
    bool remote = false;               ///< complete only once a flush issued after it completed
    bool fetch = false;                ///< a fetching atomic: its old value goes to the device
    unsigned width = 8;                ///< the atomic's width
    std::uint64_t operand = 0;
    std::uint64_t reply = 0;  ///< an atomic's old value (CompareSwap: the new value first)
    /// Its word operation goes as a message (`word`), sent once every earlier ticket and its own
    /// put are complete; it is done when the answer came.
    bool word_message = false;
    bool word_sent = false;
    WordRequest word;
    /// Staged (staged_): a put or get of `staged_bytes` at heap offset `staged_offset` of the
    /// peer, carried by one request message per chunk, up to kStagedWindow of them unanswered
    /// (`window_`); `staged_sent`: bytes asked for so far. Put: `staged_src` is read chunk by
    /// chunk; its signal rides with the last chunk, sent once every other one was answered (so
    /// the target has all the data in place first, whatever order the messages arrive in). Get:
    /// each answer's data goes to its place in `staged_dst`.
    const char* staged_src = nullptr;
    char* staged_dst = nullptr;
    std::uint64_t staged_offset = 0, staged_bytes = 0, staged_sent = 0;
    bool staged_signal = false;
    bool staged_begun = false;  ///< its first message went (a 0-byte put_signal has just one)
    /// Host memory a put into a landing region sends from: its source copied out of memory UCX
    /// cannot read (staged_).
    std::vector<char> copy;
  };
  /// One message of the open staged put or get: the request (UCX reads it and `data`, a put's
  /// chunk, until the send completes) and whether its send and its answer are still to come.
  struct StagedChunk {
    UcxProxy* proxy = nullptr;
    WordRequest request;
    std::vector<char> data;
    bool sending = false;
    bool awaiting = false;
  };
  /// Staged chunks in flight per put or get: a few chunks hide the round trip each costs (the
  /// target's receive ring holds four).
  static constexpr std::size_t kStagedWindow = 4;
  /// An answer this rank is sending (UCX reads `message` and `data` until the send completes).
  struct SentReply {
    UcxProxy* proxy = nullptr;
    WordReply message;
    bool done = false;
    std::vector<char> data;  ///< a get's data
  };
  /// The worker flush in flight: when it completes every ticket below `target` was applied.
  struct Flush {
    UcxProxy* proxy = nullptr;
    bool in_flight = false;
    std::uint64_t target = 0;
  };

  void landing_added(const Landing& region) override;
  void progress_loop();
  /// Turns `d` into UCX operations for ticket `t`. False when the transport failed.
  bool issue(Ticket& t, const ProxyDesc& d);
  /// Puts `bytes` from `src` at `offset` of `region` (0 = heap) of t's peer, one operation per
  /// registered segment it spans.
  bool put(Ticket& t, std::uint32_t region, std::uint64_t offset, const char* src,
           std::uint64_t bytes);
  /// Updates the 8-byte signal word at `offset` of `region` of t's peer.
  bool signal(Ticket& t, std::uint32_t region, std::uint64_t offset, std::uint32_t op,
              std::uint64_t value);
  bool get(Ticket& t, std::uint64_t offset, char* dst, std::uint64_t bytes);
  bool atomic(Ticket& t, const ProxyDesc& d);
  /// Makes t's word operation (`op` on the `width`-byte word at `offset` of `region`, 0 = the
  /// heap, of t's peer) a message the peer applies (word_ops_am_).
  bool word_by_message(Ticket& t, platform::WordOp op, std::uint32_t region, std::uint64_t offset,
                       unsigned width, std::uint64_t operand, std::uint64_t expected);
  /// Whether [offset, offset + bytes) lies inside `region` (0 = the heap) of this rank, whose
  /// layout every rank shares.
  bool inside_region(std::uint32_t region, std::uint64_t offset, std::uint64_t bytes) const;
  /// Makes the put or get `d` into the peer's heap a series of request messages (staged_):
  /// `src` is the put's source.
  bool stage(Ticket& t, const ProxyDesc& d, const char* src);
  /// Sends t's word message (a signal or atomic by message).
  bool send_word(Ticket& t);
  /// Sends the next chunks of the staged put or get `t` as far as the window allows, and ends
  /// `t` when every chunk was answered (its data in place). True when it did something.
  bool advance_staged(Ticket& t);
  static void on_chunk_sent(void* request, ucs_status_t status, void* user_data);
  /// Serves one request a peer sent (false: refused, the transport failed).
  bool serve(const Received<WordRequest>& m);
  /// Takes one answer to this rank's open request (false: refused, the transport failed).
  bool take_answer(const Received<WordReply>& m);
  /// Serves the request messages peers sent and takes the answers to ours.
  bool serve_word_messages();
  /// Copies a received message (header and payload) into `queue` (under received_mutex_; one of
  /// the wrong size, or whose data did not come with it, marks malformed_). Called inside UCX's
  /// progress, which must not block.
  template <class Message>
  static ucs_status_t queue_message(void* arg, const void* header, std::size_t header_bytes,
                                    const void* data, std::size_t bytes,
                                    const ucp_am_recv_param_t* param,
                                    std::vector<Received<Message>> UcxProxy::*queue);
  static ucs_status_t on_word_request(void* arg, const void* header, std::size_t header_bytes,
                                      void* data, std::size_t bytes,
                                      const ucp_am_recv_param_t* param);
  static ucs_status_t on_word_reply(void* arg, const void* header, std::size_t header_bytes,
                                    void* data, std::size_t bytes,
                                    const ucp_am_recv_param_t* param);
  static void on_reply_sent(void* request, ucs_status_t status, void* user_data);
  static ucs_status_t on_ended(void* arg, const void* header, std::size_t header_bytes, void* data,
                               std::size_t bytes, const ucp_am_recv_param_t* param);
  /// Once the transport failed (not because a peer said so): tells every peer, once.
  void tell_peers_ended();
  /// Where [offset, offset + bytes) of `region` of `peer` starts (`addr`, `key`) and how much of
  /// it one registration covers (`span`); false when it lies outside what was registered.
  bool locate(int peer, std::uint32_t region, std::uint64_t offset, std::uint64_t bytes,
              std::uint64_t* addr, ucp_rkey_h* key, std::uint64_t* span);
  /// Parameters of a UCX request of `t` that calls `done` on completion.
  static ucp_request_param_t request(Ticket& t, ucp_send_nbx_callback_t done);
  /// Calls `issue(at, span, addr, key)` for each registered span of [offset, offset + bytes) of
  /// `region` of t's peer (`at`: the span's offset in the transfer); refuses the descriptor with
  /// `outside` when part of it lies outside what the peer registered.
  template <class Issue>
  bool each_span(Ticket& t, std::uint32_t region, std::uint64_t offset, std::uint64_t bytes,
                 const char* outside, Issue issue);
  /// What a failed UCX operation on a GPU heap most likely means ("" on the host backend).
  const char* gpu_hint() const {
    if (!device_heap_) return "";
    return word_ops_am_ ? " (on GPU memory: UCX moves it through its CUDA support; GNIO_NET=tcp "
                          "stages through host memory instead)"
                        : " (UCX found no protocol for it on GPU memory: UCX atomics into a GPU "
                          "heap need InfiniBand/RoCE with GPUDirect RDMA and device-memory "
                          "atomics; GNIO_UCX_WORD_OPS=auto sends signals and atomics as messages "
                          "instead)";
  }
  /// Accounts for the request `r` a UCX call returned for `t`; false (transport failed) on error.
  bool started(ucs_status_ptr_t r, Ticket& t, bool reads_source, const char* what);
  /// Orders the next operation after every earlier one (the device API's per-peer order).
  void order();
  /// Fails the transport for a descriptor that names what no peer registered (device code
  /// passed a bad offset, or an internal error).
  bool refuse(const Ticket& t, const char* what);
  static void on_done(void* request, ucs_status_t status, void* user_data);
  static void on_source_done(void* request, ucs_status_t status, void* user_data);
  static void on_flushed(void* request, ucs_status_t status, void* user_data);
  /// A UCX request of `t` ended with `status`.
  void completed(Ticket& t, ucs_status_t status, bool reads_source);

  Bootstrap& bootstrap_;
  net::UcxMesh mesh_;
  bool device_heap_ = false;
  // GNIO_UCX_WORD_OPS: signals and atomics into peers' heaps go as messages their proxy applies
  // (through `words_`, this rank's side of that) instead of as UCX atomics.
  bool word_ops_am_ = false;
  std::unique_ptr<Staging> words_;
  // The heap is memory UCX cannot reach (GPU memory, UCX without CUDA; GNIO_PROXY_STAGING=always
  // on the host backend too): puts and gets of peers' heaps go as request messages whose data
  // their proxy threads move (words_ here) and sources are copied out to host memory first
  // (`out_`), in chunks of `chunk_`; the heap is not registered with UCX.
  bool staged_ = false;
  std::unique_ptr<Staging> out_;
  std::size_t chunk_ = 0;
  // The chunks of the one open staged ticket (word_ticket_): no other is taken until it ends.
  std::array<StagedChunk, kStagedWindow> window_;
  // Fault injection (GNIO_NET_BAD_REPLY): answers name a ticket the asker never used.
  std::uint64_t bad_reply_ = 0;
  // Word messages and answers received (by whichever thread progressed the worker), not yet
  // handled; `malformed_`: one had the wrong size.
  std::mutex received_mutex_;
  // Set (under received_mutex_) whenever a handler left something above: the progress loop
  // looks at it instead of taking the lock on every turn.
  std::atomic<bool> received_{false};
  std::vector<Received<WordRequest>> word_requests_;
  std::vector<Received<WordReply>> word_replies_;
  bool malformed_ = false;
  // The first peer that said its transport failed, the rank it lost (-1: none) and why.
  int ended_peer_ = -1;
  int ended_lost_ = -1;
  std::string ended_why_;
  // Proxy thread: the peers were told of this rank's failure (or it came from one of them).
  bool told_peers_ = false;
  // What they are told (UCX reads both until the sends complete).
  Ended ended_;
  std::string ended_text_;
  // Registrations: the heap's segments (one per growth, ascending offsets, covering
  // [0, exposed_)) and the landing inboxes (id - 1). Appended by the collective thread, read by
  // the proxy thread.
  struct Segment {
    std::uint64_t offset;
    std::unique_ptr<net::UcxMesh::Region> region;
  };
  std::mutex regions_mutex_;
  std::vector<Segment> segments_;
  std::uint64_t exposed_ = 0;
  std::vector<std::unique_ptr<net::UcxMesh::Region>> inboxes_;
  // Proxy thread only.
  std::deque<Ticket> tickets_;
  std::uint64_t flushed_ = 0;
  Flush flush_;
  bool issued_ = false;  // an operation was issued since the last fence
  // The ticket whose word message is not answered yet: no later one is taken until it is, so
  // that operations after it take effect after it.
  Ticket* word_ticket_ = nullptr;
  std::deque<SentReply> replies_out_;
  std::uint64_t operations_ = 0, fences_ = 0, flushes_ = 0;  // GNIO_PROXY_STATS
  std::uint64_t words_sent_ = 0, words_applied_ = 0;         // GNIO_PROXY_STATS
  std::thread thread_;
};

UcxProxy::UcxProxy(platform::Backend& backend, Bootstrap& bs, const std::vector<int>& node_of_rank,
                   char* heap_base, std::uint64_t heap_bytes, DeviceControl* control,
                   StreamRef stream, double timeout_s, std::function<void(int)> on_link_lost)
    : Proxy(backend, bs, heap_base, heap_bytes, control, stream, timeout_s,
            std::move(on_link_lost)),
      bootstrap_(bs),
      mesh_(bs, node_of_rank, [this](int peer, const std::string& why) {
        if (!stop_.load(std::memory_order_acquire))
          fail_transport(format("rank %d: ucx transport: the connection from rank %d ended (UCX "
                                "endpoint error: %s); that rank failed or its link is down",
                                rank_, peer, why.c_str()),
                         peer);
      }) {
  device_heap_ = backend_.kind() != platform::BackendKind::Host;
  const bool forced = staging_forced();
  staged_ = forced || (device_heap_ && !mesh_.reaches_cuda_memory());
  // Whether the heap is registered with UCX is a collective matter (set_heap_bytes), and how a
  // peer's puts arrive depends on it: every rank must decide alike.
  {
    std::vector<std::uint8_t> all(static_cast<std::size_t>(size_));
    all[static_cast<std::size_t>(rank_)] = staged_ ? 1 : 0;
    bs.allgather(all.data(), 1);
    for (int r = 0; r < size_; ++r)
      if (all[static_cast<std::size_t>(r)] != all[0])
        fail(ErrorClass::InvalidArgument,
             "rank %d: GNIO_NET=ucx: rank %d stages heap data through host memory and rank %d "
             "does not (GNIO_PROXY_STAGING, or UCX with and without CUDA support, differ between "
             "ranks); set the same on every rank",
             rank_, all[0] ? 0 : r, all[0] ? r : 0);
  }
  chunk_ = config_size("GNIO_PROXY_CHUNK");
  const std::string word_ops = config_text("GNIO_UCX_WORD_OPS");
  GNIO_REQUIRE(word_ops == "auto" || word_ops == "rma" || word_ops == "am",
               "GNIO_UCX_WORD_OPS='%s' is not one of auto, rma, am", word_ops.c_str());
  if (staged_ && word_ops == "rma")
    fail(ErrorClass::Unsupported,
         "rank %d: GNIO_UCX_WORD_OPS=rma: the heap is not registered with UCX (%s), because %s; "
         "signals and atomics go as messages (GNIO_UCX_WORD_OPS=auto or am)",
         rank_, ucp_get_version_string(),
         forced ? "GNIO_PROXY_STAGING=always"
                : "this UCX cannot reach GPU memory (built without CUDA support)");
  // UCX atomics only where asked: UCX applies them only where a transport does atomics on the
  // target memory (no GPU memory without GPUDirect RDMA), and UCX 1.16 and later find no protocol
  // at all for a fetching atomic without RDMA hardware, host memory included (tcp, shared memory).
  // (Staged with rma failed above: an unregistered heap takes no UCX atomics.)
  word_ops_am_ = word_ops != "rma";
  if (staged_)
    GNIO_INFO(Proxy,
              "rank %d: ucx transport: puts and gets of other nodes' heaps go as messages staged "
              "through host memory (%s)",
              rank_,
              forced ? "GNIO_PROXY_STAGING=always"
                     : "this UCX cannot reach GPU memory: built without CUDA");
  bad_reply_ = config_bool("GNIO_NET_BAD_REPLY") ? std::uint64_t{1} << 62 : 0;
  // Every rank serves word messages (the choice is the same everywhere, but a peer's is not
  // this rank's business); the handlers are in place before the collective heap registration
  // below, which no rank passes before every rank set them.
  mesh_.on_active_message(kWordRequestMessage, &UcxProxy::on_word_request, this);
  mesh_.on_active_message(kWordReplyMessage, &UcxProxy::on_word_reply, this);
  mesh_.on_active_message(kEndedMessage, &UcxProxy::on_ended, this);
  // Direct where this thread addresses the heap, as the tcp proxy's (GNIO_PROXY_STAGING).
  const bool direct = !device_heap_ && !forced;
  words_ = std::make_unique<Staging>(backend_, Staging::Direction::Inbound, direct,
                                     staged_ ? chunk_ : 4096);
  if (staged_)
    out_ = std::make_unique<Staging>(backend_, Staging::Direction::Outbound, direct, chunk_);
  flush_.proxy = this;
  set_heap_bytes(heap_bytes);
  use_doorbell_fd();  // the thread sleeps on UCX's event descriptor and the doorbell at once
  thread_ = std::thread([this] { run_guarded("ucx", [this] { progress_loop(); }); });
}

UcxProxy::~UcxProxy() {
  stop_.store(true, std::memory_order_release);
  ring_doorbell();
  if (thread_.joinable()) thread_.join();
  if (!failed() && !control_stopped(*control_, dev::Order::Acquire)) {
    try {
      bootstrap_.barrier();
    } catch (const std::exception& e) {
      GNIO_INFO(Proxy, "rank %d: ucx transport teardown: %s", rank_, e.what());
    }
  }
  // Keys and registrations go before the endpoints they were unpacked for.
  for (Segment& s : segments_) mesh_.release(*s.region);
  for (auto& r : inboxes_) mesh_.release(*r);
  mesh_.close(5.0);
  if (stats())
    std::fprintf(
        stderr,
        "gnio proxy stats, rank %d, ucx: %llu operations, %llu fences, %llu flushes, %llu word "
        "messages sent, %llu applied\n",
        rank_, static_cast<unsigned long long>(operations_),
        static_cast<unsigned long long>(fences_), static_cast<unsigned long long>(flushes_),
        static_cast<unsigned long long>(words_sent_),
        static_cast<unsigned long long>(words_applied_));
}

void UcxProxy::set_heap_bytes(std::uint64_t bytes) {
  std::uint64_t from = 0;
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    from = exposed_;
  }
  if (bytes > from && !staged_) {
    // Collective (every rank's heap grew alike); outside the lock, so the proxy thread keeps
    // progressing the peers' operations meanwhile.
    auto region = mesh_.expose(heap_base_ + from, bytes - from, device_heap_);
    std::lock_guard<std::mutex> lock(regions_mutex_);
    segments_.push_back(Segment{from, std::move(region)});
    exposed_ = bytes;
  }
  Proxy::set_heap_bytes(bytes);
}

void UcxProxy::landing_added(const Landing& region) {
  auto r = mesh_.expose(region.inbox, region.inbox_bytes, false);
  std::lock_guard<std::mutex> lock(regions_mutex_);
  inboxes_.push_back(std::move(r));
}

bool UcxProxy::locate(int peer, std::uint32_t region, std::uint64_t offset, std::uint64_t bytes,
                      std::uint64_t* addr, ucp_rkey_h* key, std::uint64_t* span) {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  const auto p = static_cast<std::size_t>(peer);
  if (region != 0) {
    if (region > inboxes_.size()) return false;
    const net::UcxMesh::Region& r = *inboxes_[region - 1];
    if (!inside_heap(offset, bytes, r.bytes)) return false;
    *addr = r.remote_base[p] + offset;
    *key = r.rkey[p];
    *span = bytes;
    return true;
  }
  if (!inside_heap(offset, bytes, exposed_)) return false;
  for (const Segment& s : segments_) {
    if (offset < s.offset || offset - s.offset >= s.region->bytes) continue;
    *addr = s.region->remote_base[p] + (offset - s.offset);
    *key = s.region->rkey[p];
    *span = std::min(bytes, s.region->bytes - (offset - s.offset));
    return true;
  }
  return false;
}

void UcxProxy::order() {
  if (issued_) {
    const ucs_status_t st = ucp_worker_fence(mesh_.worker());
    if (st != UCS_OK)
      fail_transport(format("rank %d: ucx transport: ucp_worker_fence failed: %s", rank_,
                            net::ucx_status(st).c_str()));
    ++fences_;
  }
  issued_ = true;
  ++operations_;
}

bool UcxProxy::refuse(const Ticket& t, const char* what) {
  fail_transport(
      format("rank %d: ucx transport: proxy descriptor %llu to rank %d %s (internal "
             "error, or device code passed an offset outside the symmetric heap)",
             rank_, static_cast<unsigned long long>(t.number), t.peer, what));
  return false;
}

void UcxProxy::completed(Ticket& t, ucs_status_t status, bool reads_source) {
  --t.pending;
  if (reads_source) --t.source_pending;
  if (status != UCS_OK && !stop_.load(std::memory_order_acquire))
    fail_transport(format("rank %d: ucx transport: an operation to rank %d failed: %s%s", rank_,
                          t.peer, net::ucx_status(status).c_str(), gpu_hint()),
                   t.peer);
}

void UcxProxy::on_done(void* request, ucs_status_t status, void* user_data) {
  auto* t = static_cast<Ticket*>(user_data);
  t->proxy->completed(*t, status, false);
  ucp_request_free(request);
}

void UcxProxy::on_source_done(void* request, ucs_status_t status, void* user_data) {
  auto* t = static_cast<Ticket*>(user_data);
  t->proxy->completed(*t, status, true);
  ucp_request_free(request);
}

void UcxProxy::on_flushed(void* request, ucs_status_t status, void* user_data) {
  auto* f = static_cast<Flush*>(user_data);
  f->in_flight = false;
  if (status == UCS_OK)
    f->proxy->flushed_ = f->target;
  else if (!f->proxy->stop_.load(std::memory_order_acquire))
    f->proxy->fail_transport(format("rank %d: ucx transport: a flush failed: %s", f->proxy->rank_,
                                    net::ucx_status(status).c_str()));
  ucp_request_free(request);
}

bool UcxProxy::started(ucs_status_ptr_t r, Ticket& t, bool reads_source, const char* what) {
  if (r == nullptr) return true;  // completed at once
  if (UCS_PTR_IS_ERR(r)) {
    fail_transport(format("rank %d: ucx transport: %s to rank %d failed: %s%s", rank_, what, t.peer,
                          net::ucx_status(UCS_PTR_STATUS(r)).c_str(), gpu_hint()),
                   t.peer);
    return false;
  }
  ++t.pending;
  if (reads_source) ++t.source_pending;
  return true;
}

ucp_request_param_t UcxProxy::request(Ticket& t, ucp_send_nbx_callback_t done) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = done;
  param.user_data = &t;
  return param;
}

template <class Issue>
bool UcxProxy::each_span(Ticket& t, std::uint32_t region, std::uint64_t offset, std::uint64_t bytes,
                         const char* outside, Issue issue) {
  std::uint64_t done = 0;
  while (done < bytes) {
    std::uint64_t addr = 0, span = 0;
    ucp_rkey_h key = nullptr;
    if (!locate(t.peer, region, offset + done, bytes - done, &addr, &key, &span))
      return refuse(t, outside);
    if (!issue(done, span, addr, key)) return false;
    done += span;
  }
  return true;
}

bool UcxProxy::put(Ticket& t, std::uint32_t region, std::uint64_t offset, const char* src,
                   std::uint64_t bytes) {
  const ucp_request_param_t param = request(t, &UcxProxy::on_source_done);
  t.remote = true;
  return each_span(t, region, offset, bytes, "writes outside the memory the peer registered",
                   [&](std::uint64_t at, std::uint64_t span, std::uint64_t addr, ucp_rkey_h key) {
                     return started(
                         ucp_put_nbx(mesh_.ep(t.peer), src + at, span, addr, key, &param), t, true,
                         "a put");
                   });
}

bool UcxProxy::get(Ticket& t, std::uint64_t offset, char* dst, std::uint64_t bytes) {
  const ucp_request_param_t param = request(t, &UcxProxy::on_done);
  return each_span(t, 0, offset, bytes, "reads outside the memory the peer registered",
                   [&](std::uint64_t at, std::uint64_t span, std::uint64_t addr, ucp_rkey_h key) {
                     return started(
                         ucp_get_nbx(mesh_.ep(t.peer), dst + at, span, addr, key, &param), t, false,
                         "a get");
                   });
}

bool UcxProxy::signal(Ticket& t, std::uint32_t region, std::uint64_t offset, std::uint32_t op,
                      std::uint64_t value) {
  std::uint64_t addr = 0, span = 0;
  ucp_rkey_h key = nullptr;
  if (offset % 8 != 0 || !locate(t.peer, region, offset, 8, &addr, &key, &span) || span != 8)
    return refuse(t, "names a signal word outside the peer's registered memory or unaligned");
  ucp_request_param_t param = request(t, &UcxProxy::on_done);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(8);
  t.operand = value;
  ucp_atomic_op_t aop = UCP_ATOMIC_OP_ADD;
  if (op == static_cast<std::uint32_t>(SignalOp::Set)) {
    // A swap needs somewhere to put the old value; nobody reads it.
    aop = UCP_ATOMIC_OP_SWAP;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.reply_buffer = &t.reply;
  }
  t.remote = true;
  return started(ucp_atomic_op_nbx(mesh_.ep(t.peer), aop, &t.operand, 1, addr, key, &param), t,
                 false, "a signal");
}

bool UcxProxy::atomic(Ticket& t, const ProxyDesc& d) {
  const auto width = static_cast<unsigned>(d.bytes);
  std::uint64_t addr = 0, span = 0;
  ucp_rkey_h key = nullptr;
  if ((width != 4 && width != 8) || d.dst_offset % width != 0 || d.sig_op >= kAtomicOpCount)
    return refuse(t,
                  "asks for an atomic on a word that is misaligned, of a width other than 4 "
                  "or 8, or an unknown operation");
  const std::uint64_t mask = width == 8 ? ~std::uint64_t{0} : 0xffffffffull;
  t.width = width;
  t.fetch = (d.flags & kProxyFetch) != 0;
  if (word_ops_am_)  // word_by_message checks the offset against the heap
    return word_by_message(t, word_op_of(static_cast<AtomicOp>(d.sig_op)), 0, d.dst_offset, width,
                           d.value & mask, d.sig_offset & mask);
  if (!locate(t.peer, 0, d.dst_offset, width, &addr, &key, &span) || span != width)
    return refuse(t, "asks for an atomic on a word outside the registered heap");
  t.operand = d.value & mask;
  bool reply = true;
  ucp_atomic_op_t aop = UCP_ATOMIC_OP_ADD;
  switch (static_cast<AtomicOp>(d.sig_op)) {
    case AtomicOp::Fetch:
      aop = UCP_ATOMIC_OP_OR;
      t.operand = 0;
      break;
    case AtomicOp::Set:
    case AtomicOp::Swap: aop = UCP_ATOMIC_OP_SWAP; break;
    case AtomicOp::Add: reply = false; break;
    case AtomicOp::FetchAdd: break;
    case AtomicOp::CompareSwap:
      // UCX: `buffer` holds the expected value, the reply buffer the new one (and then the old).
      aop = UCP_ATOMIC_OP_CSWAP;
      t.operand = d.sig_offset & mask;
      t.reply = d.value & mask;
      break;
  }
  ucp_request_param_t param = request(t, &UcxProxy::on_done);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(width);
  if (reply) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.reply_buffer = &t.reply;
  } else {
    t.remote = true;  // a posted add completes here at once; a flush says it landed
  }
  return started(ucp_atomic_op_nbx(mesh_.ep(t.peer), aop, &t.operand, 1, addr, key, &param), t,
                 false, "an atomic");
}

bool UcxProxy::inside_region(std::uint32_t region, std::uint64_t offset,
                             std::uint64_t bytes) const {
  if (region == 0) return inside_heap(offset, bytes, heap_bytes_.load(std::memory_order_acquire));
  const Landing* land = landing(region);
  return land && inside_heap(offset, bytes, land->inbox_bytes);
}

bool UcxProxy::word_by_message(Ticket& t, platform::WordOp op, std::uint32_t region,
                               std::uint64_t offset, unsigned width, std::uint64_t operand,
                               std::uint64_t expected) {
  if (offset % width != 0 || !inside_region(region, offset, width))
    return refuse(t,
                  "names a signal or atomic word outside the peer's heap or landing region, or "
                  "unaligned");
  t.word_message = true;
  t.word.token = token_;
  t.word.ticket = t.number;
  t.word.ask = static_cast<std::uint32_t>(Ask::Word);
  t.word.offset = offset;
  t.word.operand = operand;
  t.word.expected = expected;
  t.word.from = rank_;
  t.word.op = static_cast<std::uint32_t>(op);
  t.word.width = width;
  t.word.region = region;
  ++operations_;
  return true;
}

bool UcxProxy::stage(Ticket& t, const ProxyDesc& d, const char* src) {
  const bool get = d.op == static_cast<std::uint32_t>(ProxyOp::Get);
  const bool signal = d.op == static_cast<std::uint32_t>(ProxyOp::PutSignal);
  // The target checks the offsets before it writes or reads a byte (serve()), as the tcp
  // transport's receiver does.
  t.word_message = true;
  t.word.token = token_;
  t.word.ticket = t.number;
  t.word.ask = static_cast<std::uint32_t>(get ? Ask::Get : Ask::Put);
  t.word.from = rank_;
  t.word.sig_offset = d.sig_offset;
  t.word.operand = d.value;
  t.word.op = static_cast<std::uint32_t>(signal_word_op(d.sig_op));
  t.staged_offset = d.dst_offset;
  t.staged_bytes = d.bytes;
  t.staged_signal = signal;
  if (get) {
    t.staged_dst = reinterpret_cast<char*>(d.src);
  } else {
    t.staged_src = src;
    t.source_pending = 1;  // until its last chunk was copied out
  }
  ++operations_;
  return true;
}

bool UcxProxy::send_word(Ticket& t) {
  ucp_request_param_t param = request(t, &UcxProxy::on_done);
  t.word_sent = true;
  ++t.pending;  // the answer
  ++words_sent_;
  bootstrap::release_network_order_for_tsan();
  return started(ucp_am_send_nbx(mesh_.ep(t.peer), kWordRequestMessage, &t.word, sizeof t.word,
                                 nullptr, 0, &param),
                 t, false, "a request message");
}

bool UcxProxy::advance_staged(Ticket& t) {
  const bool put = t.word.ask == static_cast<std::uint32_t>(Ask::Put);
  bool did = false;
  while (t.staged_sent < t.staged_bytes || !t.staged_begun) {
    auto free = std::find_if(window_.begin(), window_.end(),
                             [](const StagedChunk& c) { return !c.sending && !c.awaiting; });
    if (free == window_.end()) return did;
    const std::uint64_t n = std::min<std::uint64_t>(chunk_, t.staged_bytes - t.staged_sent);
    const bool last = t.staged_sent + n == t.staged_bytes;
    const bool with_signal = put && last && t.staged_signal;
    if (with_signal && std::any_of(window_.begin(), window_.end(),
                                   [](const StagedChunk& c) { return c.awaiting; }))
      return did;  // the signal goes once every other chunk's data is in place
    StagedChunk& c = *free;
    c.proxy = this;
    c.request = t.word;
    c.request.offset = t.staged_offset + t.staged_sent;
    c.request.bytes = n;
    c.request.signal = with_signal ? 1 : 0;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxProxy::on_chunk_sent;
    param.user_data = &c;
    const void* payload = nullptr;
    if (put && n > 0) {
      c.data.resize(static_cast<std::size_t>(n));
      out_->read(c.data.data(), t.staged_src + t.staged_sent, c.data.size());
      payload = c.data.data();
      // Eager: the target's handler gets the data with the message (no rendezvous to drive).
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_AM_SEND_FLAG_EAGER;
    }
    t.staged_sent += n;
    t.staged_begun = true;
    if (put && last) t.source_pending = 0;
    c.awaiting = true;
    c.sending = true;
    ++words_sent_;
    did = true;
    bootstrap::release_network_order_for_tsan();
    const ucs_status_ptr_t r =
        ucp_am_send_nbx(mesh_.ep(t.peer), kWordRequestMessage, &c.request, sizeof c.request,
                        payload, payload ? c.data.size() : 0, &param);
    if (r == nullptr) {
      c.sending = false;
    } else if (UCS_PTR_IS_ERR(r)) {
      c.sending = false;
      fail_transport(format("rank %d: ucx transport: a request message to rank %d failed: %s",
                            rank_, t.peer, net::ucx_status(UCS_PTR_STATUS(r)).c_str()),
                     t.peer);
      return did;
    }
  }
  if (std::any_of(window_.begin(), window_.end(),
                  [](const StagedChunk& c) { return c.sending || c.awaiting; }))
    return did;
  // Every chunk answered: its data is in place (a put's at the peer, a get's here).
  t.word_message = false;
  word_ticket_ = nullptr;
  return true;
}

void UcxProxy::on_chunk_sent(void* request, ucs_status_t status, void* user_data) {
  auto* c = static_cast<StagedChunk*>(user_data);
  c->sending = false;
  if (status != UCS_OK && !c->proxy->stop_.load(std::memory_order_acquire))
    c->proxy->fail_transport(format("rank %d: ucx transport: a request message failed: %s",
                                    c->proxy->rank_, net::ucx_status(status).c_str()));
  ucp_request_free(request);
}

template <class Message>
ucs_status_t UcxProxy::queue_message(void* arg, const void* header, std::size_t header_bytes,
                                     const void* data, std::size_t bytes,
                                     const ucp_am_recv_param_t* param,
                                     std::vector<Received<Message>> UcxProxy::*queue) {
  auto* self = static_cast<UcxProxy*>(arg);
  std::lock_guard<std::mutex> lock(self->received_mutex_);
  // Payloads are sent eagerly, so the data is here during the call; a rendezvous would mean a
  // sender that is not this build.
  if (header_bytes != sizeof(Message) ||
      (bytes > 0 && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0)) {
    self->malformed_ = true;
    self->received_.store(true, std::memory_order_release);
    return UCS_OK;
  }
  Received<Message> m;
  std::memcpy(&m.header, header, sizeof m.header);
  if (bytes > 0)
    m.data.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  (self->*queue).push_back(std::move(m));
  self->received_.store(true, std::memory_order_release);
  return UCS_OK;
}

ucs_status_t UcxProxy::on_word_request(void* arg, const void* header, std::size_t header_bytes,
                                       void* data, std::size_t bytes,
                                       const ucp_am_recv_param_t* param) {
  return queue_message(arg, header, header_bytes, data, bytes, param, &UcxProxy::word_requests_);
}

ucs_status_t UcxProxy::on_word_reply(void* arg, const void* header, std::size_t header_bytes,
                                     void* data, std::size_t bytes,
                                     const ucp_am_recv_param_t* param) {
  return queue_message(arg, header, header_bytes, data, bytes, param, &UcxProxy::word_replies_);
}

void UcxProxy::on_reply_sent(void* request, ucs_status_t status, void* user_data) {
  auto* sent = static_cast<SentReply*>(user_data);
  sent->done = true;
  if (status != UCS_OK && !sent->proxy->stop_.load(std::memory_order_acquire))
    sent->proxy->fail_transport(
        format("rank %d: ucx transport: sending the answer to a signal or atomic failed: %s",
               sent->proxy->rank_, net::ucx_status(status).c_str()));
  ucp_request_free(request);
}

ucs_status_t UcxProxy::on_ended(void* arg, const void* header, std::size_t header_bytes, void* data,
                                std::size_t bytes, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxProxy*>(arg);
  Ended e;
  if (header_bytes != sizeof e) return UCS_OK;
  std::memcpy(&e, header, sizeof e);
  if (e.token != self->token_ || e.from < 0 || e.from >= self->size_) return UCS_OK;
  std::lock_guard<std::mutex> lock(self->received_mutex_);
  if (self->ended_peer_ >= 0) return UCS_OK;
  self->ended_peer_ = e.from;
  self->ended_lost_ = e.lost >= 0 && e.lost < self->size_ ? e.lost : -1;
  // The reason is short (eager): its data is here during the call. Otherwise it is left out.
  if (data && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0)
    self->ended_why_.assign(static_cast<const char*>(data), std::min<std::size_t>(bytes, 1024));
  self->received_.store(true, std::memory_order_release);
  return UCS_OK;
}

void UcxProxy::tell_peers_ended() {
  told_peers_ = true;
  ended_ = Ended{token_, rank_, failed_peer()};
  ended_text_ = failure();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  param.cb.send = [](void* request, ucs_status_t, void*) { ucp_request_free(request); };
  for (int peer : mesh_.peers()) {
    // Best effort: a peer that cannot be reached will find out by itself.
    const ucs_status_ptr_t r =
        ucp_am_send_nbx(mesh_.ep(peer), kEndedMessage, &ended_, sizeof ended_, ended_text_.data(),
                        ended_text_.size(), &param);
    (void)r;
  }
}

bool UcxProxy::serve_word_messages() {
  std::vector<Received<WordRequest>> requests;
  std::vector<Received<WordReply>> replies;
  bool malformed = false;
  int ended = -1, lost = -1;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(received_mutex_);
    received_.store(false, std::memory_order_relaxed);
    requests.swap(word_requests_);
    replies.swap(word_replies_);
    malformed = malformed_;
    ended = ended_peer_;
    lost = ended_lost_;
    why = ended_why_;
  }
  // What a peer asks or answers follows what this rank told it before (ThreadSanitizer learns
  // that order from gnio's sockets only).
  bootstrap::acquire_network_order_for_tsan();
  if (ended >= 0) {
    told_peers_ = true;  // no echo: the failure is the peer's
    // The rank to blame is the one the peer lost, if its failure was a lost link (and not this
    // rank: then the peer itself, which this rank can no longer work with).
    fail_transport(format("rank %d: ucx transport: rank %d's transport failed: %s", rank_, ended,
                          why.empty() ? "(its log says why)" : why.c_str()),
                   lost >= 0 && lost != rank_ ? lost : ended);
    return false;
  }
  if (malformed) {
    fail_transport(
        format("rank %d: ucx transport: a peer sent a request or answer message of the wrong "
               "size or by rendezvous (a different gnio build?)",
               rank_));
    return false;
  }
  for (const Received<WordRequest>& m : requests)
    if (!serve(m)) return false;
  while (!replies_out_.empty() && replies_out_.front().done) replies_out_.pop_front();
  for (const Received<WordReply>& m : replies)
    if (!take_answer(m)) return false;
  return true;
}

bool UcxProxy::serve(const Received<WordRequest>& m) {
  const WordRequest& q = m.header;
  // Checked before anything is written: a message that fails is refused whole.
  const std::uint64_t heap = heap_bytes_.load(std::memory_order_acquire);
  const auto ask = static_cast<Ask>(q.ask);
  bool valid = q.token == token_ && q.from >= 0 && q.from < size_ && mesh_.ep(q.from) &&
               q.op <= static_cast<std::uint32_t>(platform::WordOp::CompareSwap);
  switch (ask) {
    case Ask::Word:
      valid = valid && (q.width == 4 || q.width == 8) && q.offset % q.width == 0 &&
              inside_region(q.region, q.offset, q.width) && m.data.empty();
      break;
    case Ask::Put:
      valid = valid && q.region == 0 && inside_heap(q.offset, q.bytes, heap) &&
              m.data.size() == q.bytes &&
              (q.signal == 0 || (q.sig_offset % 8 == 0 && inside_heap(q.sig_offset, 8, heap)));
      break;
    case Ask::Get:
      valid = valid && q.region == 0 && inside_heap(q.offset, q.bytes, heap) && m.data.empty();
      break;
    default: valid = false;
  }
  if (!valid) {
    fail_transport(
        format("rank %d: ucx transport: rejected a request message (ask %u) claiming "
               "rank %d (job token, rank, width, alignment, operation, payload, region %u or "
               "offset %llu + %llu bytes (heap: %llu) wrong); nothing was written",
               rank_, q.ask, q.from, q.region, static_cast<unsigned long long>(q.offset),
               static_cast<unsigned long long>(q.bytes), static_cast<unsigned long long>(heap)),
        q.from >= 0 && q.from < size_ ? q.from : -1);
    return false;
  }
  // Carried out after every earlier operation of that peer: it sent this once they completed.
  std::uint64_t old = 0;
  std::vector<char> data;
  if (ask == Ask::Word && q.region != 0) {
    // A landing inbox is host memory this thread addresses (as tcp's receiver does): the data
    // before it came by UCX puts the sender saw complete before it sent this.
    old = platform::apply_word_op(landing(q.region)->inbox + q.offset, q.width,
                                  static_cast<platform::WordOp>(q.op), q.operand, q.expected,
                                  dev::Order::AcqRel);
  } else if (ask == Ask::Word) {
    old = words_->word_atomic(heap_base_ + q.offset, q.width, static_cast<platform::WordOp>(q.op),
                              q.operand, q.expected);
  } else {
    // A put's data (then its signal) is in place, or a get's read, before the answer goes.
    const Staging::Signal signal{reinterpret_cast<std::uint64_t*>(heap_base_ + q.sig_offset),
                                 static_cast<platform::WordOp>(q.op), q.operand};
    std::uint64_t mark = 0;
    const Deadline deadline = Deadline::no_progress_for(timeout_s_);
    const bool ok = ask == Ask::Put
                        ? words_->receive(m.data.data(), heap_base_ + q.offset, m.data.size(),
                                          q.signal ? &signal : nullptr, deadline, &mark) &&
                              words_->settle(deadline)
                        : words_->settle(deadline);
    if (!ok) {
      fail_transport(
          format("rank %d: ucx transport: the data of rank %d's put did not land: no "
                 "delivery completed for %.0f s (the GPU did not run the proxy's copies)",
                 rank_, q.from, timeout_s_));
      return false;
    }
    if (ask == Ask::Get) {
      data.resize(static_cast<std::size_t>(q.bytes));
      out_->read(data.data(), heap_base_ + q.offset, data.size());
    }
  }
  ++words_applied_;
  replies_out_.push_back(SentReply{
      this, WordReply{token_, q.ticket ^ bad_reply_, old, q.offset, rank_, 0}, false, {}});
  SentReply& sent = replies_out_.back();
  sent.data = std::move(data);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxProxy::on_reply_sent;
  param.user_data = &sent;
  if (!sent.data.empty()) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
  }
  bootstrap::release_network_order_for_tsan();
  const ucs_status_ptr_t r =
      ucp_am_send_nbx(mesh_.ep(q.from), kWordReplyMessage, &sent.message, sizeof sent.message,
                      sent.data.empty() ? nullptr : sent.data.data(), sent.data.size(), &param);
  if (r == nullptr) {
    sent.done = true;
  } else if (UCS_PTR_IS_ERR(r)) {
    sent.done = true;
    fail_transport(format("rank %d: ucx transport: answering rank %d's request failed: %s", rank_,
                          q.from, net::ucx_status(UCS_PTR_STATUS(r)).c_str()),
                   q.from);
    return false;
  }
  return true;
}

bool UcxProxy::take_answer(const Received<WordReply>& m) {
  const WordReply& r = m.header;
  Ticket* t = word_ticket_;
  const bool get = t && t->word.ask == static_cast<std::uint32_t>(Ask::Get);
  const bool staged = t && t->word.ask != static_cast<std::uint32_t>(Ask::Word);
  // A staged ticket's answer names one of its unanswered chunks, and a get's brings its bytes.
  StagedChunk* chunk = nullptr;
  if (staged)
    for (StagedChunk& c : window_)
      if (c.awaiting && c.request.offset == r.offset) chunk = &c;
  const bool expected =
      t && r.token == token_ && r.ticket == t->number && r.from == t->peer &&
      (staged ? chunk != nullptr && m.data.size() == (get ? chunk->request.bytes : 0)
              : t->word_sent && m.data.empty());
  if (!expected) {
    fail_transport(
        format("rank %d: ucx transport: rank %d sent an answer naming ticket %llu "
               "(%zu bytes of data), which answers no open %s of this rank; nothing "
               "of it was used",
               rank_, r.from, static_cast<unsigned long long>(r.ticket), m.data.size(),
               get                                                        ? "get"
               : t && t->word.ask == static_cast<std::uint32_t>(Ask::Put) ? "put"
                                                                          : "signal or atomic"),
        r.from >= 0 && r.from < size_ ? r.from : -1);
    return false;
  }
  if (staged) {
    if (get) {
      // The ticket is done (and its device reads the data) only once the data is in place.
      std::uint64_t mark = 0;
      const Deadline deadline = Deadline::no_progress_for(timeout_s_);
      if (!words_->receive(m.data.data(), t->staged_dst + (r.offset - t->staged_offset),
                           m.data.size(), nullptr, deadline, &mark) ||
          !words_->settle(deadline)) {
        fail_transport(
            format("rank %d: ucx transport: the data of a get from rank %d did not land: no "
                   "delivery completed for %.0f s (the GPU did not run the proxy's copies)",
                   rank_, t->peer, timeout_s_));
        return false;
      }
    }
    chunk->awaiting = false;  // advance_staged sends the next chunks, or ends the ticket
    return true;
  }
  --t->pending;
  t->reply = r.old;
  t->word_message = false;
  word_ticket_ = nullptr;
  return true;
}

bool UcxProxy::issue(Ticket& t, const ProxyDesc& d) {
  if (t.peer < 0 || t.peer >= size_ || !mesh_.ep(t.peer))
    return refuse(t, "names a rank that is not a remote peer");
  const std::uint32_t region = d.flags >> kProxyRegionShift;
  switch (static_cast<ProxyOp>(d.op)) {
    case ProxyOp::Put:
    case ProxyOp::PutSignal: {
      const bool inline_data = (d.flags & kProxyInline) != 0 && d.bytes <= kProxyInlineBytes;
      if ((d.flags & kProxyHostSource) != 0 && !in_outbox(d.src, d.bytes))
        return refuse(t, "sends from host memory outside every landing outbox");
      const char* src = inline_data ? handle_.inline_data +
                                          (t.number & (handle_.capacity - 1)) * kProxyInlineBytes
                                    : reinterpret_cast<const char*>(d.src);
      if (staged_ && region == 0) return stage(t, d, src);
      if (staged_ && !inline_data && (d.flags & kProxyHostSource) == 0 && d.bytes > 0) {
        // Into a landing region (host memory, registered): UCX sends from a host copy, made once
        // the range is known to fit (regions have the same layout on every rank).
        if (!inside_region(region, d.dst_offset, d.bytes))
          return refuse(t, "writes outside the memory the peer registered");
        t.copy.resize(static_cast<std::size_t>(d.bytes));
        out_->read(t.copy.data(), src, t.copy.size());
        src = t.copy.data();
      }
      order();
      if (!put(t, region, d.dst_offset, src, d.bytes)) return false;
      if (d.op == static_cast<std::uint32_t>(ProxyOp::Put)) return true;
      if (word_ops_am_)  // sent once the data is in place
        return word_by_message(t, signal_word_op(d.sig_op), region, d.sig_offset, 8, d.value, 0);
      order();  // the signal lands after the data
      return signal(t, region, d.sig_offset, d.sig_op, d.value);
    }
    case ProxyOp::Signal:
      if (word_ops_am_)
        return word_by_message(t, signal_word_op(d.sig_op), region, d.sig_offset, 8, d.value, 0);
      order();
      return signal(t, region, d.sig_offset, d.sig_op, d.value);
    case ProxyOp::Get:
      if (region != 0) return refuse(t, "reads a landing region");
      if (staged_) return stage(t, d, nullptr);
      order();
      return get(t, d.dst_offset, reinterpret_cast<char*>(d.src), d.bytes);
    case ProxyOp::Atomic:
      if (region != 0) return refuse(t, "updates a landing region");
      order();
      return atomic(t, d);
  }
  return refuse(t, "has an unknown operation");
}

void UcxProxy::progress_loop() {
  using Clock = std::chrono::steady_clock;
  const std::uint64_t mask = handle_.capacity - 1;
  ucp_worker_h worker = mesh_.worker();
  int efd = -1;
  if (ucp_worker_get_efd(worker, &efd) != UCS_OK) efd = -1;
  std::uint64_t next = 0, head = 0, done = 0, flush_needed = 0;
  std::vector<Ticket*> fetching;  // fetching atomics whose value is not delivered yet
  unsigned idle = 0;
  auto last_work = Clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    if (!failed() && !word_ticket_) {
      for (int taken = 0; taken < 64; ++taken) {
        const ProxyDesc* slot = handle_.slots + (next & mask);
        if (!descriptor_published(next)) break;
        const ProxyDesc d = *slot;
        tickets_.push_back(Ticket{});
        Ticket& t = tickets_.back();
        t.proxy = this;
        t.number = next;
        t.peer = d.peer;
        if (!issue(t, d)) break;
        if (t.remote) flush_needed = next + 1;
        if (t.fetch) fetching.push_back(&t);
        ++next;
        busy = true;
        if (t.word_message) {
          word_ticket_ = &t;
          break;
        }
      }
    }
    while (ucp_worker_progress(worker) != 0) busy = true;
    if (!told_peers_ && received_.load(std::memory_order_acquire)) (void)serve_word_messages();
    if (failed() && !told_peers_) tell_peers_ended();
    if (!failed() && word_ticket_ && &tickets_.front() == word_ticket_ &&
        word_ticket_->pending == 0 && (!word_ticket_->remote || flushed_ > word_ticket_->number)) {
      // Everything before it is done and its own put in place: the peer applies it after them.
      if (word_ticket_->word.ask != static_cast<std::uint32_t>(Ask::Word)) {
        busy |= advance_staged(*word_ticket_);
      } else if (!word_ticket_->word_sent) {
        (void)send_word(*word_ticket_);
        busy = true;
      }
    }
    if (!failed()) {
      for (std::size_t i = 0; i < fetching.size();) {
        Ticket& t = *fetching[i];
        if (t.pending != 0 || t.word_message) {
          ++i;
          continue;
        }
        const std::uint64_t value = t.width == 8 ? t.reply : (t.reply & 0xffffffffull);
        if (!deliver_result(t.number, value)) break;
        t.fetch = false;
        fetching[i] = fetching.back();
        fetching.pop_back();
        busy = true;
      }
      // The head passes every ticket whose sources were read, in order.
      const std::uint64_t head_before = head;
      while (head < next && tickets_[head - done].source_pending == 0) ++head;
      if (head != head_before) publish_head(head);
      if (!flush_.in_flight && flush_needed > flushed_) {
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send = &UcxProxy::on_flushed;
        param.user_data = &flush_;
        ++flushes_;
        const ucs_status_ptr_t r = ucp_worker_flush_nbx(worker, &param);
        if (r == nullptr) {
          flushed_ = next;
        } else if (UCS_PTR_IS_ERR(r)) {
          fail_transport(format("rank %d: ucx transport: a flush failed: %s", rank_,
                                net::ucx_status(UCS_PTR_STATUS(r)).c_str()));
        } else {
          flush_.in_flight = true;
          flush_.target = next;
        }
        busy = true;
      }
      const std::uint64_t done_before = done;
      while (!tickets_.empty() && done < head) {
        const Ticket& t = tickets_.front();
        if (t.pending != 0 || t.fetch || t.word_message || (t.remote && t.number >= flushed_))
          break;
        tickets_.pop_front();
        ++done;
      }
      if (done != done_before) publish_done(done);
    }
    const bool left_published = descriptor_published(next);
    const auto now = Clock::now();
    if (busy) {
      idle = 0;
      last_work = now;
    } else if (++idle < 64 || now - last_work < spin()) {
      std::this_thread::yield();
    } else if (efd >= 0 && ucp_worker_arm(worker) == UCS_OK) {
      // Asleep until the network has something (a peer's operation to apply, a completion) or
      // the doorbell rings (see sleep_until_rung). A descriptor the last turn saw and left
      // (waiting for a word message's answer or for UCX resources) needs no look.
      sleep_until_rung(std::chrono::microseconds(idle < 1024 ? 20 : 200), efd,
                       [&] { return !left_published && descriptor_published(next); });
    }
  }
}

}  // namespace

std::string ucx_summary() {
  const net::UcxLibrary library = net::UcxMesh::probe();
  if (!library.error.empty())
    return format("UCX %s, unusable here: %s", library.version.c_str(), library.error.c_str());
  return format("UCX %s; heaps in GPU memory %s", library.version.c_str(),
                staging_forced() ? "staged through host memory (GNIO_PROXY_STAGING=always)"
                : library.reaches_cuda_memory
                    ? "registered with UCX directly (UCX has CUDA support)"
                    : "staged through host memory as messages (this UCX "
                      "has no CUDA support)");
}

std::unique_ptr<Proxy> make_ucx_proxy(platform::Backend& backend, Bootstrap& bootstrap,
                                      const std::vector<int>& node_of_rank, char* heap_base,
                                      std::uint64_t heap_bytes, DeviceControl* control,
                                      StreamRef stream, double timeout_s,
                                      std::function<void(int)> on_link_lost) {
  return std::make_unique<UcxProxy>(backend, bootstrap, node_of_rank, heap_base, heap_bytes,
                                    control, stream, timeout_s, std::move(on_link_lost));
}

}  // namespace gnio::proxy
