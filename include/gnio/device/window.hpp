// DeviceWindow: a registered user buffer (gnio::Window, Comm::register_buffer) as kernels see it.
// A trivially copyable handle that Window::device_handle() returns and kernels take by value; it
// turns (peer, byte offset) into an address this rank can load and store.
//
// Behind it is a small table in device memory, one entry per rank of this node: the address at
// which this process sees that rank's buffer, and the buffer's size. The handle is valid while
// the Window it came from is registered: deregistering (Comm::deregister or the last Window copy
// going away) frees the table and unmaps the peers' buffers, so no kernel using the handle may
// still run then (deregistering waits for this rank's device work first).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/macros.hpp"

namespace gnio {

/// One node rank's registered buffer as this process addresses it.
struct DeviceWindowEntry {
  std::uint64_t address = 0;  ///< 0 when the rank registered 0 bytes
  std::uint64_t bytes = 0;
};

/// The device-side handle of a registered buffer. Fields are filled by
/// Window::device_handle(); treat them as private and use the member functions.
struct DeviceWindow {
  const DeviceWindowEntry* peers_ = nullptr;   ///< [local_size_] by node-local index
  const std::int16_t* local_index_ = nullptr;  ///< [size_] node-local index or -1 (non-contiguous)
  int rank_ = 0;
  int size_ = 0;
  int local_size_ = 0;
  int node_first_ = 0;           ///< world rank of the node's first rank, when contiguous
  bool node_contiguous_ = true;  ///< node ranks are node_first_ .. node_first_+local_size_-1

  /// True for a handle of a registered window (false for a default-constructed one).
  GNIO_HD_INLINE bool valid() const { return peers_ != nullptr; }
  GNIO_HD_INLINE int rank() const { return rank_; }
  GNIO_HD_INLINE int size() const { return size_; }

  /// Node-local index of world rank `peer`, or -1 when it is on another node or out of range.
  GNIO_HD_INLINE int local_index(int peer) const {
    if (static_cast<unsigned>(peer) >= static_cast<unsigned>(size_)) return -1;
    if (node_contiguous_) {
      const int li = peer - node_first_;
      return static_cast<unsigned>(li) < static_cast<unsigned>(local_size_) ? li : -1;
    }
    return local_index_[peer];
  }

  /// Bytes of `peer`'s buffer that this rank can reach: its registered size for a rank of this
  /// node, 0 for a rank on another node (unreachable; Window::bytes() on the host knows its size).
  GNIO_HD_INLINE std::size_t bytes(int peer) const {
    const int li = local_index(peer);
    return li < 0 ? 0 : static_cast<std::size_t>(peers_[li].bytes);
  }

  /// `peer`'s buffer at `byte_offset`, as an address this rank can load and store; nullptr when
  /// `peer` is unreachable (another node), registered 0 bytes, or `byte_offset` lies beyond its
  /// buffer (one past the end is allowed). peer == rank() gives this rank's own buffer.
  template <class T = void>
  GNIO_HD_INLINE T* peer_ptr(int peer, std::size_t byte_offset = 0) const {
    const int li = local_index(peer);
    if (li < 0) return nullptr;
    const DeviceWindowEntry e = peers_[li];
    if (e.address == 0 || byte_offset > e.bytes) return nullptr;
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(e.address + byte_offset));
  }

  /// This rank's own buffer at `byte_offset` (peer_ptr(rank(), byte_offset)).
  template <class T = void>
  GNIO_HD_INLINE T* local(std::size_t byte_offset = 0) const {
    return peer_ptr<T>(rank_, byte_offset);
  }
};

}  // namespace gnio
