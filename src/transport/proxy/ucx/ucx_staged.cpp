// UcxProxy's staged path (ucx_proxy_class.hpp): with a UCX that cannot reach GPU memory (or
// GNIO_PROXY_STAGING=always) the heap is not registered, and a put or get of a peer's heap goes
// as request messages, one per chunk, whose data both proxies copy through host memory, at most
// kStagedWindow chunks in flight. Built only with UCX.
#include <algorithm>
#include <cstring>

#include "base/fail.hpp"
#include "bootstrap/socket.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/ucx/ucx_proxy_class.hpp"

namespace gnio::proxy {

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
    requests_.open(t.number, c.request.offset,
                   OpenRequest{t.peer, put ? RequestKind::Update : RequestKind::Get, put ? 0 : n,
                               static_cast<std::uint64_t>(&c - window_.data())});
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

}  // namespace gnio::proxy
