// Window: a user buffer registered with a communicator (Comm::register_buffer), zero-copy. Every
// rank registers one buffer of its own (sizes and addresses may differ, 0 bytes is allowed); the
// ranks of a node map each other's buffers, so kernels load and store a node peer's buffer
// directly through the window's device handle (gnio/device/window.hpp). Ranks on other nodes are
// recorded as unreachable.
//
// Lifetime rules:
//  * Registering and deregistering are collective over all ranks of the communicator, in the
//    same order on every rank (like alloc/free).
//  * The registered memory stays owned by the application: keep it allocated until the window is
//    deregistered, and free it only afterwards.
//  * Deregistering (Comm::deregister, or destroying the last copy of the Window) waits for this
//    rank's device work, then for every rank, before unmapping the peers' buffers; after it
//    returns on a rank, no peer reads or writes that rank's buffer through the window any more.
//  * A Window keeps its communicator alive; destroy windows before (or together with) the last
//    Comm copy, in the same order on every rank.
//  * DeviceWindow handles are valid while the window is registered.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "gnio/device/window.hpp"

namespace gnio {

namespace detail {
class WindowImpl;
}

/// A registered user buffer (host object). Copies share one registration, deregistered with the
/// last copy (or explicitly with Comm::deregister). A default-constructed Window is empty.
class Window {
 public:
  Window() = default;
  Window(const Window&) = default;
  Window& operator=(const Window&) = default;
  Window(Window&&) noexcept = default;
  Window& operator=(Window&&) noexcept = default;
  /// The last copy of a registered window deregisters it (collective; errors are logged).
  ~Window() = default;

  /// True while the window is registered.
  bool valid() const noexcept;
  explicit operator bool() const noexcept { return valid(); }

  /// The number of ranks (the communicator's size).
  int size() const;
  /// Bytes `rank` registered (known for every rank, reachable or not).
  std::size_t bytes(int rank) const;
  /// This rank's registered buffer (the pointer passed to register_buffer).
  void* local() const;
  /// `rank`'s buffer as this process addresses it (device memory on the cuda backend: use it
  /// with Comm::copy or in kernels); nullptr when `rank` is on another node or registered 0 bytes.
  void* peer(int rank) const;
  /// True when `rank`'s buffer is mapped here: same node, and it registered more than 0 bytes.
  bool reachable(int rank) const;
  /// The handle kernels take by value; valid while the window is registered.
  DeviceWindow device_handle() const;
  /// Same as device_handle() (its name before the convention; kept for existing code).
  DeviceWindow device() const { return device_handle(); }

  /// The implementation (internal).
  const std::shared_ptr<detail::WindowImpl>& impl() const noexcept { return impl_; }
  /// Wraps an implementation (internal; Comm::register_buffer creates windows).
  explicit Window(std::shared_ptr<detail::WindowImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<detail::WindowImpl> impl_;
};

}  // namespace gnio
