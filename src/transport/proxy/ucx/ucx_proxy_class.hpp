// UcxProxy, the class behind make_ucx_proxy() (ucx_proxy.hpp describes the design). Private to
// src/transport/proxy/ucx/, whose files define its members: ucx_proxy.cpp (construction,
// one-sided operations, completion, the proxy thread), ucx_word_messages.cpp (signals and
// atomics as messages the target's proxy applies, and every request's answer) and ucx_staged.cpp
// (heap data through host memory, for a UCX that cannot reach it). Built only with UCX.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "platform/word_op.hpp"
#include "transport/net/ucx/ucx_mesh.hpp"
#include "transport/proxy/open_requests.hpp"
#include "transport/proxy/proxy.hpp"
#include "transport/proxy/staging.hpp"
#include "transport/proxy/ticket_ledger.hpp"

namespace gnio::proxy {

class UcxProxy final : public Proxy {
 public:
  explicit UcxProxy(const ProxyArgs& args);
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

  /// One ticket taken from the ring, until it is done. Lives in tickets_ (which keeps it at its
  /// address: UCX's completion callbacks hold it).
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
  TicketLedger<Ticket> tickets_;
  std::uint64_t flushed_ = 0;
  Flush flush_;
  bool issued_ = false;  // an operation was issued since the last fence
  // The ticket whose word message is not answered yet: no later one is taken until it is, so
  // that operations after it take effect after it.
  Ticket* word_ticket_ = nullptr;
  // Its messages awaiting their answers: part 0 for a word message, a staged chunk's offset for
  // each chunk (`where`: the chunk's place in window_).
  OpenRequests requests_;
  std::deque<SentReply> replies_out_;
  std::uint64_t operations_ = 0, fences_ = 0, flushes_ = 0;  // GNIO_PROXY_STATS
  std::uint64_t words_sent_ = 0, words_applied_ = 0;         // GNIO_PROXY_STATS
  std::thread thread_;
};

}  // namespace gnio::proxy
