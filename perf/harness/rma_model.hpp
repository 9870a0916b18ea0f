// The RMA benchmark's model, shared by gnio-perf (gnio's device API) and nvshmem-perf (NVSHMEM's):
// what is measured (operations, cooperation scopes, modes), how a message is split among the
// groups of a bandwidth launch, the data pattern every transfer carries and how it is checked.
// Both programs use these definitions, so their numbers measure the same thing.
//
// Everything here is usable in kernels of both backends (GNIO_HD) and in plain host code; it
// includes no gnio host header and no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/device/macros.hpp"

namespace gnio::perf {

/// The operation a measurement exercises.
enum class RmaOp : int {
  Put,          ///< put of S bytes from private memory into the peer's symmetric buffer
  Get,          ///< blocking get of S bytes of the peer's symmetric buffer into private memory
  PutSignal,    ///< put + signal (Set) to the peer, the signal ordered after the data
  FetchAdd,     ///< 64-bit remote fetch-and-add (latency only)
  CompareSwap,  ///< 64-bit remote compare-and-swap (latency only)
};
inline constexpr int kRmaOps = 5;

/// The cooperation group that issues one call: one thread, one warp, or one whole block.
enum class Scope : int { Thread, Warp, Block };
inline constexpr int kScopes = 3;

/// What is timed.
enum class Mode : int {
  Lat,   ///< latency: one group, one operation after another (see rma_suite.hpp for each op)
  Bw,    ///< unidirectional bandwidth: rank 0 -> rank 1, many groups at once
  Bibw,  ///< bidirectional bandwidth: both ranks at once
};
inline constexpr int kModes = 3;

GNIO_HD_INLINE constexpr bool is_atomic(RmaOp op) {
  return op == RmaOp::FetchAdd || op == RmaOp::CompareSwap;
}

/// Destination bytes are set to this before every checked transfer; the pattern never has it.
inline constexpr std::uint8_t kPoison = 0xA5;
/// Bytes after the end of every checked destination that must still hold the poison afterwards
/// (catches overruns).
inline constexpr std::uint64_t kGuardBytes = 256;
/// Message slices and get windows start at multiples of this, so the copy routines' 16-byte
/// vector paths are taken whenever the size allows.
inline constexpr std::uint64_t kSliceAlign = 256;

/// splitmix64: a fast, well-mixed hash. Two different (seed, word) inputs practically never give
/// the same 8 bytes, so misplaced, stale or repeated data does not pass the check.
GNIO_HD_INLINE std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The 8 pattern bytes of 64-bit word `word` of a buffer filled with `seed` (little-endian byte
/// order: byte i of the buffer is byte i % 8 of word i / 8). No byte equals kPoison.
GNIO_HD_INLINE std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t word) {
  std::uint64_t v = mix64(seed * 0xD6E8FEB86659FD93ull + word);
  // Replace poison bytes (about 3% of words have one) so an unwritten byte is always detected.
  for (int b = 0; b < 8; ++b) {
    if (((v >> (8 * b)) & 0xFF) == kPoison) v ^= std::uint64_t{0xFF} << (8 * b);
  }
  return v;
}

/// Byte `i` of a buffer filled with `seed`.
GNIO_HD_INLINE std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(pattern_word(seed, i >> 3) >> (8 * (i & 7)));
}

/// Writes the pattern into bytes [0, n) of `buf`, or the poison when `poison` is true. Thread
/// `t` of `nt` handles every nt-th word. `buf` must be 8-byte aligned.
GNIO_HD_INLINE void fill_share(std::uint8_t* buf, std::uint64_t n, std::uint64_t seed, bool poison,
                               std::uint64_t t, std::uint64_t nt) {
  const std::uint64_t words = n / 8;
  auto* w = reinterpret_cast<std::uint64_t*>(buf);
  for (std::uint64_t i = t; i < words; i += nt)
    w[i] = poison ? 0xA5A5A5A5A5A5A5A5ull : pattern_word(seed, i);
  if (t == 0)
    for (std::uint64_t i = words * 8; i < n; ++i) buf[i] = poison ? kPoison : pattern_byte(seed, i);
}

/// Counts the bytes of `buf` that are wrong: [0, n) must hold the pattern of `seed`, and
/// [n, n + guard) the poison. Thread `t` of `nt` checks every nt-th word; the caller adds up the
/// threads' counts. `buf` must be 8-byte aligned.
GNIO_HD_INLINE std::uint64_t count_wrong_share(const std::uint8_t* buf, std::uint64_t n,
                                               std::uint64_t guard, std::uint64_t seed,
                                               std::uint64_t t, std::uint64_t nt) {
  std::uint64_t wrong = 0;
  const std::uint64_t words = n / 8;
  const auto* w = reinterpret_cast<const std::uint64_t*>(buf);
  for (std::uint64_t i = t; i < words; i += nt) {
    const std::uint64_t diff = w[i] ^ pattern_word(seed, i);
    if (diff)
      for (int b = 0; b < 8; ++b) wrong += ((diff >> (8 * b)) & 0xFF) != 0;
  }
  if (t == 0) {
    for (std::uint64_t i = words * 8; i < n; ++i) wrong += buf[i] != pattern_byte(seed, i);
    for (std::uint64_t i = n; i < n + guard; ++i) wrong += buf[i] != kPoison;
  }
  return wrong;
}

/// How a bandwidth launch splits one message of `bytes` among its groups: group g moves bytes
/// [g * chunk, min((g + 1) * chunk, bytes)). Each group gets at least 16 bytes per thread (one
/// vector per lane), so small messages use fewer groups rather than slivers; groups >= `groups`
/// stay idle.
struct Split {
  std::uint64_t chunk = 0;   ///< bytes per group, a multiple of 16 (of kSliceAlign when large)
  std::uint64_t groups = 0;  ///< groups that move data

  GNIO_HD_INLINE std::uint64_t offset(std::uint64_t g) const { return g * chunk; }
  GNIO_HD_INLINE std::uint64_t length(std::uint64_t g, std::uint64_t bytes) const {
    const std::uint64_t off = g * chunk;
    return off >= bytes ? 0 : (bytes - off < chunk ? bytes - off : chunk);
  }
};

/// The split of `bytes` over `total_groups` groups of `group_threads` threads each.
inline Split split_message(std::uint64_t bytes, std::uint64_t total_groups,
                           std::uint64_t group_threads) {
  Split s;
  if (bytes == 0 || total_groups == 0) return s;
  const std::uint64_t min_chunk = 16 * group_threads;
  std::uint64_t chunk = (bytes + total_groups - 1) / total_groups;
  if (chunk < min_chunk) chunk = min_chunk;
  const std::uint64_t align = chunk >= 4 * kSliceAlign ? kSliceAlign : 16;
  chunk = (chunk + align - 1) / align * align;
  s.chunk = chunk;
  s.groups = (bytes + chunk - 1) / chunk;
  return s;
}

/// Layout of the 64-bit signal words each rank allocates (symmetric) for the benchmark.
struct SignalLayout {
  std::uint64_t ping_pong = 0;  ///< word index of the put_signal ping-pong signal
  std::uint64_t atomic = 1;     ///< word index of the atomics' target word
  std::uint64_t start = 2;      ///< first of `blocks` per-block start words (bibw handshake)
  std::uint64_t group = 0;      ///< first of `groups` per-group signals (put_signal bandwidth)
  std::uint64_t words = 0;      ///< total words

  static SignalLayout make(std::uint64_t max_blocks, std::uint64_t max_groups) {
    SignalLayout l;
    l.group = l.start + max_blocks;
    l.words = l.group + max_groups;
    return l;
  }
};

}  // namespace gnio::perf
