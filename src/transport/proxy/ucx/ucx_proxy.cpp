// The UCX proxy (see ucx_proxy.hpp): construction, the one-sided operations, completion and the
// proxy thread's loop. Word messages are in ucx_word_messages.cpp, the staged path in
// ucx_staged.cpp. Built only with UCX (GNIO_HAVE_UCX).
#include "transport/proxy/ucx/ucx_proxy.hpp"

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
#include "transport/proxy/idle_policy.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/ring_cursor.hpp"
#include "transport/proxy/staging.hpp"
#include "transport/proxy/ucx/ucx_proxy_class.hpp"

namespace gnio::proxy {

UcxProxy::UcxProxy(const ProxyArgs& args)
    : Proxy(args),
      bootstrap_(args.bootstrap),
      mesh_(args.bootstrap, args.node_of_rank, [this](int peer, const std::string& why) {
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
    bootstrap_.allgather(all.data(), 1);
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
  set_heap_bytes(args.heap_bytes);
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
  ucp_worker_h worker = mesh_.worker();
  int efd = -1;
  if (ucp_worker_get_efd(worker, &efd) != UCS_OK) efd = -1;
  RingCursor cursor(handle_);
  std::uint64_t flush_needed = 0;
  std::vector<Ticket*> fetching;  // fetching atomics whose value is not delivered yet
  IdlePolicy idle(spin());
  while (!stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    if (!failed() && !word_ticket_) {
      for (int taken = 0; taken < 64; ++taken) {
        const ProxyDesc* slot = cursor.peek();
        if (!slot) break;
        const ProxyDesc d = *slot;
        Ticket& t = tickets_.open();
        t.proxy = this;
        t.number = cursor.next();
        t.peer = d.peer;
        if (!issue(t, d)) break;
        if (t.remote) flush_needed = cursor.next() + 1;
        if (t.fetch) fetching.push_back(&t);
        cursor.advance();
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
    if (!failed() && word_ticket_ && &tickets_.oldest() == word_ticket_ &&
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
      if (tickets_.pass_head([](const Ticket& t) { return t.source_pending == 0; }))
        publish_head(tickets_.head());
      if (!flush_.in_flight && flush_needed > flushed_) {
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send = &UcxProxy::on_flushed;
        param.user_data = &flush_;
        ++flushes_;
        const ucs_status_ptr_t r = ucp_worker_flush_nbx(worker, &param);
        if (r == nullptr) {
          flushed_ = cursor.next();
        } else if (UCS_PTR_IS_ERR(r)) {
          fail_transport(format("rank %d: ucx transport: a flush failed: %s", rank_,
                                net::ucx_status(UCS_PTR_STATUS(r)).c_str()));
        } else {
          flush_.in_flight = true;
          flush_.target = cursor.next();
        }
        busy = true;
      }
      if (tickets_.retire([this](const Ticket& t) {
            return t.pending == 0 && !t.fetch && !t.word_message &&
                   (!t.remote || t.number < flushed_);
          }))
        publish_done(tickets_.done());
    }
    cursor.end_turn();
    idle.after_turn(
        busy, [&] { words_->idle(); },  // stops the delivery agent after its idle spell
        [&](std::chrono::microseconds poll) {
          // Asleep until the network has something (a peer's operation to apply, a completion)
          // or the doorbell rings (see sleep_until_rung). A descriptor the last turn saw and left
          // (waiting for a word message's answer or for UCX resources) needs no look.
          if (efd >= 0 && ucp_worker_arm(worker) == UCS_OK)
            sleep_until_rung(poll, efd, [&] { return cursor.published_since_turn(); });
        });
  }
}

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

std::unique_ptr<Proxy> make_ucx_proxy(const ProxyArgs& args) {
  return std::make_unique<UcxProxy>(args);
}

}  // namespace gnio::proxy
