// The ucx network backend's connections and memory: one UCX context and worker per communicator,
// an endpoint to every rank on another node, and memory this rank exposes to them (registered
// with UCX, its remote keys and addresses exchanged through the bootstrap), so that one-sided
// puts, gets and atomics reach the peers' memory without their CPUs taking part (on transports
// that emulate RMA in software, such as tcp, the peer's worker progress applies them).
//
// UCX picks its transports itself (UCX_TLS, UCX_NET_DEVICES and the other UCX_* variables are
// honoured); this backend asks for RMA, 32- and 64-bit atomics, active messages (for what the
// peer's proxy thread must apply itself) and wake-up events.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gnio/bootstrap.hpp"

namespace gnio::net {

/// What the UCX library this process loaded offers this backend.
struct UcxLibrary {
  std::string version;               ///< ucp_get_version_string()
  bool reaches_cuda_memory = false;  ///< built with CUDA support: GPU heaps registered directly
  std::string error;                 ///< why a context could not be made ("" when it could)
};

/// Connected UCX endpoints to every remote peer and the memory exposed to them.
class UcxMesh {
 public:
  /// Makes (and frees) a context as a communicator would, to say what UCX offers here.
  static UcxLibrary probe();

  /// Called (from whichever thread progresses the worker) when the endpoint to `peer` failed.
  using ErrorHandler = std::function<void(int peer, const std::string& why)>;
  /// Collective over every rank of `bootstrap`: creates the context and worker (thread mode
  /// multi: the collective thread registers memory while a proxy thread progresses), exchanges
  /// worker addresses and creates an endpoint to every rank on another node (`node_of_rank[r]`
  /// is rank r's node) with peer-failure handling that calls `on_error`. Throws
  /// Error(SystemError) when UCX cannot be set up on some rank, on every rank (naming it).
  UcxMesh(Bootstrap& bootstrap, const std::vector<int>& node_of_rank, ErrorHandler on_error);
  /// Closes what close() did not, then frees the worker and the context.
  ~UcxMesh();
  UcxMesh(const UcxMesh&) = delete;
  UcxMesh& operator=(const UcxMesh&) = delete;

  /// Memory of this rank exposed to the remote peers: where each peer's copy lies and its key.
  struct Region {
    std::uint64_t bytes = 0;
    ucp_mem_h memh = nullptr;
    std::vector<std::uint64_t> remote_base;  ///< per rank (0 for ranks on this node)
    std::vector<ucp_rkey_h> rkey;            ///< per rank (null for ranks on this node)
  };
  /// Collective: registers [base, base + bytes) (GPU memory when `device_memory`) and learns
  /// every remote peer's region of the same call. Throws Error(SystemError) on failure.
  std::unique_ptr<Region> expose(void* base, std::uint64_t bytes, bool device_memory);
  /// Releases a region's keys and registration (not collective).
  void release(Region& region);

  /// Calls `on_message(arg, header, header_bytes, ...)` (from the thread progressing the worker)
  /// for every active message `id` a peer sends; the header is valid during the call only.
  void on_active_message(unsigned id, ucp_am_recv_callback_t on_message, void* arg);

  /// True when this UCX can register and move GPU (CUDA) memory.
  bool reaches_cuda_memory() const { return cuda_; }
  /// "UCX 1.13.1, ..." for logs.
  std::string describe() const;
  /// Ranks on other nodes, ascending.
  const std::vector<int>& peers() const { return peers_; }
  ucp_worker_h worker() const { return worker_; }
  /// The endpoint to `peer`, or null when `peer` is on this node.
  ucp_ep_h ep(int peer) const { return eps_[static_cast<std::size_t>(peer)]; }
  /// Closes every endpoint without waiting for the peers (call when they are done with this
  /// rank), progressing the worker until the closes complete and the worker has been idle for
  /// 2 ms (UCX frees a closed endpoint that still had sends in flight only on later progress),
  /// or `timeout_s` passed.
  void close(double timeout_s);

 private:
  /// This rank's context, worker and worker address (throws, leaving what it made for
  /// close_worker()).
  void start(ucp_address_t** address, std::size_t* address_bytes);
  /// Frees the worker and the context, if made.
  void close_worker();
  /// Every rank's `blob` (sizes may differ), through the bootstrap.
  std::vector<std::vector<char>> allgather_blobs(const void* blob, std::size_t bytes);

  /// What an endpoint's error handler needs to name the peer.
  struct EndpointTag {
    UcxMesh* mesh;
    int peer;
  };
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  Bootstrap& bootstrap_;
  int rank_;
  ErrorHandler on_error_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  bool cuda_ = false;
  std::vector<int> peers_;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::unique_ptr<EndpointTag>> tags_;
};

/// Text for a UCX status.
std::string ucx_status(ucs_status_t status);

}  // namespace gnio::net
