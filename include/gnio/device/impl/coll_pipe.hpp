// Pipes: flow-controlled message queues between two members through the peers' scratch (or,
// to another node, through the proxies' landing regions), which the ring and the cross-node
// OneShot move their data through.
#pragma once

#include "gnio/device/impl/coll_call.hpp"

namespace gnio::detail {

/// Where a proxied pipe end's message numbers go on from: they run on from call to call, counted
/// between calls in CollChannel::land_count.
struct PipeCount {
  std::uint64_t* count = nullptr;  ///< proxied: messages in earlier calls (this worker)
  std::uint64_t before = 0;        ///< *count when this call began (p2p: 0)
  GNIO_HD void begin(std::uint64_t* at) {
    count = at;
    before = *count;
  }
  /// Records that this call moved `messages` (the next call goes on from there). Called by every
  /// member of the group.
  template <class Coop>
  GNIO_HD void record(const Coop& g, std::uint64_t messages) {
    g.sync();  // every member has read `before`
    if (g.leader()) *count = before + messages;
    g.sync();
  }
};

/// The sending end of this worker's pipe to member d: message i goes into sub-slot i % depth of
/// this rank's area in d's scratch once d consumed message i - depth. To a peer on another node
/// the pipe runs through the proxies' landing regions instead, with no GPU work on the way: the
/// group writes the message into sub-slot i % depth of this worker's outbox (host memory), this
/// rank's proxy sends it from there into the same sub-slot of d's inbox and sets the head word
/// there; d's consumption comes back as the tail word in this rank's inbox. The post does not
/// wait for the proxy: d consumed message i - depth only after the proxy sent it, so the wait for
/// room covers the outbox sub-slot too. Such a pipe also runs on from call to call
/// (message numbers count every call's messages, kept in CollChannel::land_count), so a call ends
/// without waiting for the network round trip of its last message's consumption: the next call
/// waits for it only when it needs that sub-slot.
template <class Coop>
struct PipeOut {
  CollCall<Coop>* c = nullptr;
  int d = 0;
  std::uint64_t e = 0, sent = 0;
  char* base = nullptr;      ///< d's sub-slots (p2p) or this worker's outbox sub-slots (proxied)
  std::uint64_t remote = 0;  ///< offset of this rank's sub-slots in d's scratch (proxied: inbox)
  bool proxied = false;
  PipeCount run;  ///< proxied: messages to d
  GNIO_HD PipeOut(CollCall<Coop>& call, int dst)
      : c(&call), d(dst), e(call.epoch(dst)), proxied(call.proxied(dst)) {
    const CollChannel& ch = call.cc.ch;
    // A pipe's sub-slots [peer][worker][depth]: in the landing regions by world rank, in peer
    // memory by index on the node.
    const std::uint64_t per_worker = std::uint64_t{ch.pipe_depth} * ch.pipe_chunk;
    const std::uint64_t per_peer = std::uint64_t{ch.pipe_blocks} * per_worker;
    const std::uint64_t worker = std::uint64_t{call.w} * per_worker;
    if (proxied) {
      remote = static_cast<std::uint64_t>(call.slot(call.me)) * per_peer + worker;
      base = ch.land_out + static_cast<std::uint64_t>(call.slot(dst)) * per_peer + worker;
    } else {
      const std::uint64_t mine =
          static_cast<std::uint64_t>(call.node_slot(call.me)) * per_peer + worker;
      remote = ch.pipe.offset + mine;
      base = call.cc.dc.peer_ptr(ch.pipe, call.world(dst)) + mine;
    }
    if (proxied) run.begin(call.land_count(false, dst));
  }
  /// Waits until d consumed message `i` - 1 (and every earlier one); `i` counts this call's
  /// messages (proxied: every call's).
  GNIO_HD void wait_consumed(std::uint64_t i) {
    if (proxied) {
      c->wait_landed(c->land_flag(true, d), i, d);
    } else {
      c->wait_ge(c->flag(c->cc.ch.tail, d), progress(e, i), d);
    }
  }
  /// Waits for room; where to write the next message.
  GNIO_HD char* acquire() {
    const CollChannel& ch = c->cc.ch;
    const std::uint64_t i = run.before + sent;
    if (i >= ch.pipe_depth) wait_consumed(i - ch.pipe_depth + 1);
    return base + (i % ch.pipe_depth) * ch.pipe_chunk;
  }
  /// After the group barrier that follows the writes: publishes the message (`bytes` of it).
  /// Called by every member of the group.
  GNIO_HD void post(std::size_t bytes) {
    const CollChannel& ch = c->cc.ch;
    const std::uint64_t at = ((run.before + sent) % ch.pipe_depth) * ch.pipe_chunk;
    ++sent;
    if (!proxied) {
      if (c->g.leader()) c->signal(c->flag(ch.head, c->me), progress(e, sent), d);
      return;
    }
    // Only a leader whose waits succeeded posts: after a failure the waits return at once, and
    // d may still be reading the sub-slot (the p2p path skips its stores the same way).
    // Without waiting for the proxy to send it: the group refills this outbox sub-slot only once
    // d consumed this message (acquire()), which d's proxy signals after this rank's proxy sent
    // it. (That chain runs through two proxy threads and the network; the proxy carries it in
    // the memory model too: a receiving thread acquires what every sending thread released after
    // its sends before it applies a landing signal.)
    // A failed call sends the poison mark alone (no data): d's wait for this message fails.
    const bool ok = c->st == Status::Ok;
    ProxyDesc desc =
        proxy_desc(ok ? ProxyOp::PutSignal : ProxyOp::Signal, c->world(d), ok ? base + at : nullptr,
                   ok ? remote + at : 0, ok ? bytes : 0, c->land_flag(false, c->me),
                   c->mark(run.before + sent), SignalOp::Set);
    desc.flags = c->land_desc_flags(ok);
    DeviceCommPort::proxy_put<Coop>(c->cc.dc, desc, false, c->name, c->site, true);
  }
  /// Ends the call's use of the pipe. p2p: waits until d consumed every message (so the next call
  /// starts with an empty pipe); proxied: records how many messages went (the next call goes on
  /// from there). Called by every member of the group.
  GNIO_HD void drain() {
    if (!proxied) {
      if (sent) wait_consumed(sent);
      return;
    }
    run.record(c->g, sent);
  }
};

/// The receiving end of this worker's pipe from member s (proxied: in this rank's inbox, with
/// message numbers running on from call to call as PipeOut's).
template <class Coop>
struct PipeIn {
  CollCall<Coop>* c = nullptr;
  int s = 0;
  std::uint64_t e = 0, got = 0;
  const char* base = nullptr;
  bool proxied = false;
  PipeCount run;  ///< proxied: messages from s
  GNIO_HD PipeIn(CollCall<Coop>& call, int src)
      : c(&call), s(src), e(call.epoch(src)), proxied(call.proxied(src)) {
    const CollChannel& ch = call.cc.ch;
    const std::uint64_t theirs =
        ((static_cast<std::uint64_t>(proxied ? call.slot(src) : call.node_slot(src)) *
              ch.pipe_blocks +
          call.w) *
         ch.pipe_depth) *
        ch.pipe_chunk;
    base = (proxied ? ch.land_in : call.cc.dc.local(ch.pipe)) + theirs;
    if (proxied) run.begin(call.land_count(true, src));
  }
  /// Waits for the next message; its slot.
  GNIO_HD const char* wait() {
    if (proxied) {
      c->wait_landed(c->land_flag(false, s), run.before + got + 1, s);
    } else {
      c->wait_ge(c->flag(c->cc.ch.head, s), progress(e, got + 1), s);
    }
    return slot();
  }
  /// The slot of the next message (without waiting for it).
  GNIO_HD const char* slot() const {
    return base + ((run.before + got) % c->cc.ch.pipe_depth) * c->cc.ch.pipe_chunk;
  }
  /// After the group barrier that follows the reads: frees the slot.
  GNIO_HD void release() {
    ++got;
    if (!c->g.leader()) return;
    if (!proxied) {
      c->signal(c->flag(c->cc.ch.tail, c->me), progress(e, got), s);
      return;
    }
    // Into s's inbox, where its PipeOut waits for it.
    ProxyDesc desc =
        proxy_desc(ProxyOp::Signal, c->world(s), nullptr, 0, 0, c->land_flag(true, c->me),
                   c->mark(run.before + got), SignalOp::Set);
    desc.flags = c->land_desc_flags(false);
    (void)DeviceCommPort::proxy_post(c->cc.dc, desc, false, c->name, c->site);
  }
  /// Ends the call's use of the pipe: proxied, records how many messages came (the next call goes
  /// on from there). Called by every member of the group.
  GNIO_HD void commit() {
    if (proxied) run.record(c->g, got);
  }
};

/// A segment of a ring: `valid` bytes at `in` (this rank's input) and `out`.
struct Seg {
  const char* in;
  char* out;
  std::size_t valid;
};

}  // namespace gnio::detail
