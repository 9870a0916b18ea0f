// UcxProxy's request messages (ucx_proxy_class.hpp): signals and atomics as word messages that the
// target's proxy thread applies to its heap (GNIO_UCX_WORD_OPS=am, the default), staged puts and
// gets served the same way, and the answers that end each request at the asker. Built only with
// UCX.
#include <algorithm>
#include <cstring>
#include <optional>

#include "base/fail.hpp"
#include "bootstrap/socket.hpp"
#include "gnio/log.hpp"
#include "transport/proxy/proxy_frame.hpp"
#include "transport/proxy/ucx/ucx_proxy_class.hpp"

namespace gnio::proxy {

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

bool UcxProxy::send_word(Ticket& t) {
  ucp_request_param_t param = request(t, &UcxProxy::on_done);
  t.word_sent = true;
  ++t.pending;  // the answer
  requests_.open(t.number, 0, OpenRequest{t.peer, RequestKind::Update, 0, 0});
  ++words_sent_;
  bootstrap::release_network_order_for_tsan();
  return started(ucp_am_send_nbx(mesh_.ep(t.peer), kWordRequestMessage, &t.word, sizeof t.word,
                                 nullptr, 0, &param),
                 t, false, "a request message");
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
  // Only the open ticket's messages await answers; a staged ticket's answer names one of its
  // unanswered chunks by offset, and a get's brings that chunk's bytes.
  const std::optional<OpenRequest> asked =
      r.token == token_
          ? requests_.take(r.ticket, staged ? r.offset : 0, r.from,
                           get ? RequestKind::Get : RequestKind::Update, m.data.size())
          : std::nullopt;
  if (!t || !asked) {
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
    // advance_staged sends the next chunks, or ends the ticket.
    window_[static_cast<std::size_t>(asked->where)].awaiting = false;
    return true;
  }
  --t->pending;
  t->reply = r.old;
  t->word_message = false;
  word_ticket_ = nullptr;
  return true;
}

}  // namespace gnio::proxy
