// The TCP implementation of gnio::Bootstrap (see include/gnio/bootstrap.hpp for the contract).
//
// Threads: the application's threads, plus one progress thread per TcpBootstrap that owns the
// listener and every incoming connection (poll loop: accept, authenticate the hello, read frames
// into per-(peer, type, tag) queues). Application threads write to peers over outgoing
// connections, each under its own mutex, and wait on a condition variable for queued messages.
//
// Incoming messages are queued at the receiver until a recv (or collective step) takes them;
// there is no flow control beyond the per-message bound GNIO_BOOTSTRAP_MAX_MSG, which is fine for
// an out-of-band channel whose peers are the job's own ranks.
//
// Connections are one-way: rank A's messages to rank B travel on the connection A opened to B's
// listener (on A's first send to B); B's messages to A on the one B opened. So there is no
// connect race between two ranks and a receiver always knows a connection's rank from its hello.
//
// Its members are defined by concept: tcp_bootstrap.cpp (joining, destruction, failing the job),
// tcp_bootstrap_progress.cpp (the progress thread), tcp_bootstrap_messages.cpp (point-to-point
// frames, send and recv) and tcp_bootstrap_collectives.cpp; the factories that choose a
// rendezvous and end in join() are in bootstrap_factories.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.hpp"
#include "bootstrap/root_service.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace gnio::bootstrap {

/// gnio::Bootstrap over TCP. Create it with join().
class TcpBootstrap final : public Bootstrap {
 public:
  /// Registers with the root at `root` and returns once every rank has arrived. `own_root` is
  /// the root service this process hosts (from_env's rank 0), kept alive and joined on
  /// destruction; may be null.
  static std::unique_ptr<TcpBootstrap> join(const SockAddr& root, std::uint64_t token, int rank,
                                            int size, std::unique_ptr<RootService> own_root);
  ~TcpBootstrap() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::uint64_t token() const noexcept override { return token_; }

  void allgather(void* buf, std::size_t bytes) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;
  void barrier() override;
  void send(int peer, int tag, const void* data, std::size_t bytes) override;
  void recv(int peer, int tag, void* data, std::size_t bytes) override;

  /// Where this rank's listener accepts peer connections (for diagnostics and tests).
  const SockAddr& listen_address() const { return listen_addr_; }
  /// Stray connections the listener has dropped so far (for tests).
  std::uint64_t dropped_connections() const { return drops_.dropped(); }
  /// Makes every pending and later call throw Error(`error_class`, `message`) (the first such
  /// failure wins), without telling the peers: for a failure the caller already knows every rank
  /// learns by itself (a rank the liveness watcher saw die). Thread-safe.
  void fail_job(ErrorClass error_class, const std::string& message);

 private:
  // One incoming message.
  struct Message {
    std::uint16_t flags = 0;
    std::vector<unsigned char> data;
  };
  // What this rank knows about the connection from one peer, guarded by mutex_.
  struct Inbound {
    bool connected = false;
    bool closed = false;
    std::string close_reason;
    std::map<std::pair<std::uint16_t, std::int32_t>, std::deque<Message>> queues;
  };
  // This rank's connection to one peer.
  struct Outbound {
    std::mutex mutex;
    Fd fd;
    std::string broken;  // non-empty once the connection failed: the error to repeat
  };

  TcpBootstrap(std::uint64_t token, int rank, int size, std::unique_ptr<RootService> own_root);
  void start(const SockAddr& root);
  void rendezvous(const SockAddr& root, const Deadline& deadline);
  void progress_loop() noexcept;

  void send_frame(int peer, FrameType type, std::uint16_t flags, std::int32_t tag, const void* data,
                  std::size_t bytes, const Deadline& deadline, const std::string& what);
  void connect_peer(int peer, Outbound& out, const Deadline& deadline);
  /// Takes the next queued message from `peer` with (type, tag), waiting until `deadline`.
  /// `expect_bytes`: for Data, a message of another length is left queued and InvalidArgument
  /// thrown; for collectives it is a RemoteError (ranks out of step).
  Message take(int peer, FrameType type, std::int32_t tag, std::uint16_t flags,
               std::size_t expect_bytes, const Deadline& deadline, const std::string& what);
  void deliver_local(FrameType type, std::uint16_t flags, std::int32_t tag, const void* data,
                     std::size_t bytes);
  /// Runs one collective; on failure poisons this bootstrap and tells the peers.
  template <class F>
  void collective(CollKind kind, F&& body);
  void abort_job(const Error& error);
  /// Throws InvalidArgument ("bootstrap: <what> N bytes ...") for a message over a frame's limit.
  void require_fits(std::size_t bytes, const char* what) const;
  [[noreturn]] void throw_poisoned();
  std::string describe(int rank) const;

  const int rank_;
  const int size_;
  const std::uint64_t token_;
  const double timeout_s_;
  const std::uint64_t max_msg_;
  const double hello_timeout_s_;
  std::unique_ptr<RootService> own_root_;

  Fd listener_;
  SockAddr listen_addr_;
  SockAddr root_addr_;
  std::vector<RankRecord> peers_;
  std::vector<std::unique_ptr<Outbound>> out_;

  std::mutex mutex_;  // guards in_, poisoned_*, abort_sent_
  std::condition_variable arrived_;
  std::vector<Inbound> in_;
  std::string poisoned_;
  ErrorClass poison_class_ = ErrorClass::RemoteError;
  bool abort_sent_ = false;

  std::mutex coll_mutex_;  // one collective at a time
  std::uint32_t coll_seq_ = 0;

  Waker waker_;
  std::atomic<bool> stop_{false};
  std::thread progress_;
  DropLog drops_;
};

}  // namespace gnio::bootstrap
