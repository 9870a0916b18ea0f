// Teams: ordered subsets of a communicator's ranks that barriers and collectives run over.
// A Team is a small value type, copied into kernels.
#pragma once

#include <cstdint>

#include "gnio/device/macros.hpp"
#include "gnio/device/sym_ptr.hpp"

namespace gnio {

/// A set of ranks. Members are numbered 0..size-1; member i is world rank start + i*stride when
/// stride > 0, else members_table[i] (a table in this rank's symmetric heap, for device code; host
/// code reads the communicator's host copy, host_members_table, since the heap is GPU memory on
/// GPUs).
struct Team {
  std::uint32_t id = 0;    ///< slot of its synchronisation state; unique per communicator
  int size = 0;            ///< members
  int index = -1;          ///< this rank's index in the team; -1 when not a member
  int start = 0;           ///< first world rank (stride > 0)
  int stride = 1;          ///< distance between members' world ranks; 0 = use members_table
  const int* members_table = nullptr;  ///< world ranks of the members (stride == 0)
  const int* host_members_table = nullptr;  ///< the same in host memory (the Comm owns it)
  /// Synchronisation words, allocated in the symmetric heap when the team is created:
  /// sync_flags[size] (one per member, written by that member) and sync_epoch (local count).
  SymPtr<std::uint64_t> sync_flags{};
  SymPtr<std::uint64_t> sync_epoch{};

  /// World rank of member i.
  GNIO_HD_INLINE int world_rank(int i) const {
    if (stride > 0) return start + i * stride;
#if defined(__CUDA_ARCH__)
    return members_table[i];
#else
    return host_members_table ? host_members_table[i] : members_table[i];
#endif
  }
  /// True when this rank belongs to the team.
  GNIO_HD_INLINE bool contains_me() const { return index >= 0; }
};

}  // namespace gnio
