// Registered user buffers (gnio::Window, Comm::register_buffer): the memory-layer state behind a
// Window. The communicator (a layer above) hands in what a window needs through WindowContext.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "gnio/bootstrap.hpp"
#include "gnio/device/window.hpp"
#include "gnio/stream.hpp"
#include "platform/backend.hpp"

namespace gnio {

class SymmetricHeap;

class FdExchange;

namespace detail {

/// Memory held by a communicator's live windows on this rank (Comm::memory_stats).
struct WindowStats {
  std::atomic<std::size_t> windows{0};      ///< live registrations
  std::atomic<std::size_t> registered{0};   ///< bytes this rank registered
  std::atomic<std::size_t> peer_mapped{0};  ///< bytes of node peers' buffers mapped here
  std::atomic<std::size_t> tables{0};       ///< device memory of DeviceWindow tables
};

/// What a window needs from its communicator.
struct WindowContext {
  std::shared_ptr<void> owner;  ///< keeps the communicator (backend, bootstrap, fds) alive
  platform::Backend* backend = nullptr;
  Bootstrap* bootstrap = nullptr;
  FdExchange* fds = nullptr;
  std::vector<int> node_ranks;    ///< world ranks of this node, ascending
  int local_index = 0;            ///< this rank's position in node_ranks
  std::mutex* mutex = nullptr;    ///< the communicator's lock for collective host calls
  std::function<bool()> aborted;  ///< true once the communicator is aborted
  StreamRef stream{static_cast<CUstream_st*>(nullptr)};  ///< for setup copies (internal stream)
  WindowStats* stats = nullptr;  ///< the communicator's counters (outlive the window: `owner`)
  /// The communicator's symmetric heap: buffers inside it need no export (peers map it already).
  const SymmetricHeap* heap = nullptr;
};

/// One registration. Created by register_window(); deregistered explicitly (Comm::deregister) or
/// by the destructor (the last Window copy).
class WindowImpl {
 public:
  ~WindowImpl();
  WindowImpl(const WindowImpl&) = delete;
  WindowImpl& operator=(const WindowImpl&) = delete;

  /// Collective over all ranks, in the same order everywhere. Waits for this rank's device work
  /// and for every rank, unmaps the peers' buffers, then waits until every rank unmapped (so the
  /// owner may free its buffer when this returns). Explicit calls (`explicit_call`) throw
  /// InvalidArgument on every rank, with no effect, when the ranks name different windows; the
  /// destructor logs that and goes on. The caller holds the communicator's mutex.
  void deregister(bool explicit_call);

  bool registered() const noexcept { return registered_; }
  std::uint64_t id() const noexcept { return id_; }
  int size() const noexcept { return static_cast<int>(bytes_.size()); }
  std::size_t bytes(int rank) const;
  void* local() const;
  void* peer(int rank) const;
  DeviceWindow device() const;
  const WindowContext& context() const noexcept { return ctx_; }

 private:
  friend std::shared_ptr<WindowImpl> register_window(WindowContext ctx, std::uint64_t id, void* ptr,
                                                     std::size_t bytes);
  explicit WindowImpl(WindowContext ctx) : ctx_(std::move(ctx)) {}
  /// Releases imports and the device table (no collective).
  void release() noexcept;
  void require_registered(const char* what) const;

  WindowContext ctx_;
  std::uint64_t id_ = 0;
  bool registered_ = false;
  void* local_ = nullptr;
  std::vector<std::uint64_t> bytes_;               // by world rank
  std::vector<void*> peer_;                        // by world rank; nullptr when unreachable
  std::vector<platform::ImportedBuffer> imports_;  // by node-local index (own slot empty)
  void* table_ = nullptr;                          // device memory: entries + local index
  DeviceWindow handle_{};
};

/// Registers `bytes` at `ptr` on this rank (Comm::register_buffer). Collective over all ranks;
/// `id` must be the same on every rank (the communicator's registration counter). Validates
/// locally, agrees with every rank before mapping anything, and on any rank's failure throws on
/// every rank with no effect (InvalidArgument for memory that cannot be registered). The caller
/// holds the communicator's mutex.
std::shared_ptr<WindowImpl> register_window(WindowContext ctx, std::uint64_t id, void* ptr,
                                            std::size_t bytes);

}  // namespace detail
}  // namespace gnio
