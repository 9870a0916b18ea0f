// Cooperation groups: the set of threads that calls a device-API function together. The whole
// group calls with the same arguments; the work is split inside. A group is a template parameter
// of every operation (`comm.put<gnio::Warp>(...)`), replacing NVSHMEM's _warp/_block suffixes.
//
// Each group type offers: rank() (this thread's index in the group), size(), sync() (a barrier
// over the group), any(p) (a barrier that tells every member whether p held on any member: how a
// group agrees on an outcome before its leader publishes it) and leader() (rank() == 0).
#pragma once

#include "gnio/device/macros.hpp"
#include "gnio/device/thread.hpp"

namespace gnio {

/// One thread on its own.
struct Thread {
  GNIO_HD_INLINE unsigned rank() const { return 0; }
  GNIO_HD_INLINE static constexpr unsigned size() { return 1; }
  GNIO_HD_INLINE void sync() const {}
  GNIO_HD_INLINE bool any(bool p) const { return p; }
  GNIO_HD_INLINE bool leader() const { return true; }
};

/// An aligned tile of N lanes of one warp (N a power of two, 1..32). Every tile of a warp must
/// call together on the host backend, which synchronises tiles through a warp-wide barrier.
template <unsigned N>
struct Tile {
  static_assert(N >= 1 && N <= kWarpSize && (N & (N - 1)) == 0, "tile size: power of two <= 32");
  GNIO_HD_INLINE unsigned rank() const { return dev::lane() % N; }
  GNIO_HD_INLINE static constexpr unsigned size() { return N; }
  GNIO_HD_INLINE void sync() const {
    if constexpr (N > 1) {
#if GNIO_ON_DEVICE
      const unsigned mask = (N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (dev::lane() & ~(N - 1)));
      __syncwarp(mask);
#else
      dev::sync_warp();
#endif
    }
  }
  GNIO_HD_INLINE bool any(bool p) const {
    if constexpr (N == 1) {
      return p;
    } else {
      const unsigned mask = (N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (dev::lane() & ~(N - 1)));
      return dev::warp_ballot(mask, p) != 0;
    }
  }
  GNIO_HD_INLINE bool leader() const { return rank() == 0; }
};

/// All 32 lanes of a warp.
using Warp = Tile<kWarpSize>;

/// Every thread of the block.
struct Block {
  GNIO_HD_INLINE unsigned rank() const { return dev::thread(); }
  GNIO_HD_INLINE unsigned size() const { return dev::block_size(); }
  GNIO_HD_INLINE void sync() const { dev::sync_block(); }
  GNIO_HD_INLINE bool any(bool p) const { return dev::sync_block_or(p); }
  GNIO_HD_INLINE bool leader() const { return dev::thread() == 0; }
};

}  // namespace gnio
