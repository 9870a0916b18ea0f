// DeviceCommState: what a DeviceComm holds (its private base). Comm::device_handle() fills it
// through detail::DeviceCommPort; only DeviceComm's members and gnio's own device code read it.
#pragma once

#include <cstdint>

#include "gnio/device/proxy_ring.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/team.hpp"

namespace gnio::detail {

struct DeviceCommPort;

struct DeviceCommState {
  // ---- identity --------------------------------------------------------------------------
  int rank_ = 0;
  int size_ = 0;
  int local_rank_ = 0;
  int local_size_ = 0;
  int node_first_ = 0;           ///< world rank of the node's first rank, when contiguous
  bool node_contiguous_ = true;  ///< node ranks are node_first_ .. node_first_+local_size_-1
  // ---- symmetric heap ----------------------------------------------------------------------
  std::uint32_t heap_id_ = 0;
  /// Flat layout: node peer i's heap starts at heap_base_ + i*heap_stride_. Table layout (CUDA
  /// IPC): heap_base_ is this rank's heap and heap_stride_ is 0, so local() is the same formula.
  char* heap_base_ = nullptr;
  std::uint64_t heap_stride_ = 0;
  /// Table layout: node-local index -> base of that peer's heap (device memory); nullptr = flat.
  const std::uint64_t* heap_peer_base_ = nullptr;
  std::uint64_t heap_bytes_ = 0;               ///< bytes mapped per rank when this handle was made
  const std::int16_t* local_index_ = nullptr;  ///< [size_] node-local index or -1 (non-contiguous)
  // ---- waits -------------------------------------------------------------------------------
  DeviceControl* control_ = nullptr;  ///< host-mapped abort word and stall record
  /// Device-memory word the first failing thread claims (atomics on host-mapped memory are not
  /// supported over every PCIe link, so the record itself is written with plain stores).
  std::uint32_t* stall_claim_ = nullptr;
  std::uint64_t timeout_ns_ = 0;  ///< 0 = no deadline
  // ---- proxy transport ---------------------------------------------------------------------
  /// Command ring of the proxy thread that reaches peers on other nodes; proxy_.ring == nullptr
  /// = none.
  ProxyHandle proxy_{};
  // ---- teams -------------------------------------------------------------------------------
  Team world_{};
  Team node_{};
};

}  // namespace gnio::detail
