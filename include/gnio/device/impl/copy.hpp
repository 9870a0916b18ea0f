// Group-wide memory copy used by put/get: the group's threads split the bytes. On the GPU the body
// moves 16-byte vectors with several loads in flight per thread (peer memory has NVLink latency);
// on the host each thread memcpy's one contiguous share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gnio/device/macros.hpp"

namespace gnio::detail {

#if defined(__CUDACC__)
template <class U, int kUnroll>
__device__ __forceinline__ void copy_units(U* __restrict__ d, const U* __restrict__ s, std::size_t n,
                                           unsigned r, unsigned g) {
  std::size_t i = r;
  const std::size_t step = static_cast<std::size_t>(g) * kUnroll;
  for (; i + (kUnroll - 1) * static_cast<std::size_t>(g) < n; i += step) {
    U t[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) t[u] = s[i + u * static_cast<std::size_t>(g)];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * static_cast<std::size_t>(g)] = t[u];
  }
  for (; i < n; i += g) d[i] = s[i];
}

/// Copies at most 16 bytes with the widest stores that `a` (a common alignment of both
/// addresses, a power of two up to 16) allows.
__device__ __forceinline__ void copy_small(char* d, const char* s, std::size_t n, unsigned a) {
  std::size_t i = 0;
  if (a >= 16 && n == 16) {
    *reinterpret_cast<int4*>(d) = *reinterpret_cast<const int4*>(s);
    return;
  }
  if (a >= 8)
    for (; i + 8 <= n; i += 8) *reinterpret_cast<std::uint64_t*>(d + i) = *reinterpret_cast<const std::uint64_t*>(s + i);
  if (a >= 4)
    for (; i + 4 <= n; i += 4) *reinterpret_cast<std::uint32_t*>(d + i) = *reinterpret_cast<const std::uint32_t*>(s + i);
  if (a >= 2)
    for (; i + 2 <= n; i += 2) *reinterpret_cast<std::uint16_t*>(d + i) = *reinterpret_cast<const std::uint16_t*>(s + i);
  for (; i < n; ++i) d[i] = s[i];
}

__device__ __forceinline__ void device_copy(void* dst, const void* src, std::size_t n, unsigned r,
                                            unsigned g) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const std::uintptr_t da = reinterpret_cast<std::uintptr_t>(d), sa = reinterpret_cast<std::uintptr_t>(s);
  if (n <= 16) {
    // Signals-sized payloads: one thread, one or two stores, no loops to set up.
    if (r == 0) {
      const std::uintptr_t both = da | sa | 16;
      copy_small(d, s, n, static_cast<unsigned>(both & (~both + 1)));
    }
    return;
  }
  const std::uintptr_t mis = da ^ sa;
  // log2 of the widest unit both addresses can share (shifts, not divisions: a runtime divide is
  // a 64-bit software routine on the GPU).
  const unsigned lw = (mis & 15) == 0 ? 4 : (mis & 7) == 0 ? 3 : (mis & 3) == 0 ? 2 : (mis & 1) == 0 ? 1 : 0;
  const unsigned w = 1u << lw;
  std::size_t head = (w - (da & (w - 1))) & (w - 1);
  if (head > n) head = n;
  if (head && r == 0) copy_small(d, s, head, 1);
  d += head;
  s += head;
  n -= head;
  const std::size_t units = n >> lw;
  switch (lw) {
    case 4: copy_units<int4, 4>(reinterpret_cast<int4*>(d), reinterpret_cast<const int4*>(s), units, r, g); break;
    case 3: copy_units<std::uint64_t, 4>(reinterpret_cast<std::uint64_t*>(d), reinterpret_cast<const std::uint64_t*>(s), units, r, g); break;
    case 2: copy_units<std::uint32_t, 4>(reinterpret_cast<std::uint32_t*>(d), reinterpret_cast<const std::uint32_t*>(s), units, r, g); break;
    case 1: copy_units<std::uint16_t, 4>(reinterpret_cast<std::uint16_t*>(d), reinterpret_cast<const std::uint16_t*>(s), units, r, g); break;
    default: copy_units<char, 4>(d, s, units, r, g); break;
  }
  const std::size_t done = units << lw;
  if (done < n && r == (g > 1 ? 1u : 0u)) copy_small(d + done, s + done, n - done, w);
}
#endif

/// The group's threads together copy `n` bytes from `src` to `dst` (regions must not overlap).
/// No synchronisation: callers sync the group when its members must see each other's bytes.
template <class Coop>
GNIO_HD_INLINE void group_copy(void* dst, const void* src, std::size_t n, const Coop& g) {
#if GNIO_ON_DEVICE
  device_copy(dst, src, n, g.rank(), g.size());
#else
  const std::size_t share = (n + g.size() - 1) / g.size();
  const std::size_t begin = share * g.rank();
  if (begin < n) {
    const std::size_t len = n - begin < share ? n - begin : share;
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, len);
  }
#endif
}

}  // namespace gnio::detail
