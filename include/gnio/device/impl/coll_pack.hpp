// The data path of gnio's collectives: 16-byte units ("packs") loaded and stored with the widest
// access the addresses allow, the LL (flag-in-data) packet format, and element-wise reduction of
// packs in the accumulation type. Written once for both backends; the GPU paths use 16-byte
// vector accesses and volatile packet stores, the host paths memcpy and 8-byte atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gnio/device/atomic.hpp"
#include "gnio/device/coll_types.hpp"
#include "gnio/device/macros.hpp"

namespace gnio::detail {

/// 16 bytes of data: the unit every collective moves and reduces.
struct alignas(16) Pack {
  std::uint64_t lo, hi;
};

/// Bytes per unit.
inline constexpr std::size_t kUnit = 16;
/// Units covering `bytes` (the last one may be partial).
GNIO_HD_INLINE std::size_t units_of(std::size_t bytes) {
  return (bytes + kUnit - 1) / kUnit;
}

/// Loads 16 bytes from a 16-byte aligned address.
GNIO_HD_INLINE Pack load_pack(const void* p) {
#if GNIO_ON_DEVICE
  const ulonglong2 v = *static_cast<const ulonglong2*>(p);
  return Pack{v.x, v.y};
#else
  Pack r;
  std::memcpy(&r, p, sizeof(r));
  return r;
#endif
}
/// Stores 16 bytes to a 16-byte aligned address.
GNIO_HD_INLINE void store_pack(void* p, const Pack& v) {
#if GNIO_ON_DEVICE
  *static_cast<ulonglong2*>(p) = make_ulonglong2(v.lo, v.hi);
#else
  std::memcpy(p, &v, sizeof(v));
#endif
}

/// Copies `n` (< 16, or any) bytes with the widest accesses both addresses' alignment allows.
GNIO_HD_INLINE void copy_small(char* d, const char* s, std::size_t n) {
  const std::uintptr_t a =
      reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s);
  std::size_t i = 0;
  if ((a & 7) == 0)
    for (; i + 8 <= n; i += 8)
      *reinterpret_cast<std::uint64_t*>(d + i) = *reinterpret_cast<const std::uint64_t*>(s + i);
  if ((a & 3) == 0)
    for (; i + 4 <= n; i += 4)
      *reinterpret_cast<std::uint32_t*>(d + i) = *reinterpret_cast<const std::uint32_t*>(s + i);
  if ((a & 1) == 0)
    for (; i + 2 <= n; i += 2)
      *reinterpret_cast<std::uint16_t*>(d + i) = *reinterpret_cast<const std::uint16_t*>(s + i);
  for (; i < n; ++i) d[i] = s[i];
}

/// The bytes of a unit that is partial (the buffer's last) or not 16-byte aligned, `avail` (< 16
/// or any) of them, the rest zero. Out of line: every load site would otherwise carry the byte
/// loops of copy_small, and a buffer's last unit or an unaligned buffer has time for a call.
GNIO_NOINLINE GNIO_HD inline Pack load_unit_slow(const char* p, std::size_t avail) {
  Pack r{0, 0};
  copy_small(reinterpret_cast<char*>(&r), p, avail < kUnit ? avail : kUnit);
  return r;
}
/// Stores the first `avail` (< 16, or any) bytes of `v` at p (see load_unit_slow).
GNIO_NOINLINE GNIO_HD inline void store_unit_slow(char* p, std::size_t avail, Pack v) {
  copy_small(p, reinterpret_cast<const char*>(&v), avail < kUnit ? avail : kUnit);
}

/// Unit `u` of the `bytes`-long buffer at `base`; bytes past its end read as zero (all of it when
/// the unit starts past the end). Any alignment (the fast path needs a 16-byte aligned unit).
GNIO_HD_INLINE Pack load_unit(const char* base, std::size_t u, std::size_t bytes) {
  if (u * kUnit >= bytes) return Pack{0, 0};
  const char* p = base + u * kUnit;
  const std::size_t avail = bytes - u * kUnit;
  if (avail >= kUnit && (reinterpret_cast<std::uintptr_t>(p) & 15) == 0) return load_pack(p);
  return load_unit_slow(p, avail);
}
/// Stores unit `u` of the `bytes`-long buffer at `base`, only the bytes inside the buffer.
GNIO_HD_INLINE void store_unit(char* base, std::size_t u, std::size_t bytes, const Pack& v) {
  if (u * kUnit >= bytes) return;
  char* p = base + u * kUnit;
  const std::size_t avail = bytes - u * kUnit;
  if (avail >= kUnit && (reinterpret_cast<std::uintptr_t>(p) & 15) == 0) {
    store_pack(p, v);
    return;
  }
  store_unit_slow(p, avail, v);
}

// ---------------------------------------------------------------------------------------------
// LL packets: 8 bytes = 4 bytes of data + the call's 4-byte flag, each packet written by one
// 8-byte store, so a reader that sees the flag sees the data of the same packet. A unit of data
// travels as 4 packets (32 bytes). Readers poll until every flag of the unit equals the expected
// one; the flag changes with every call, so the buffers are never cleared.

/// Bytes of packets carrying one unit of data.
inline constexpr std::size_t kLLUnitBytes = 32;

/// Writes unit `v` with `flag` as 4 packets at `pkt` (16-byte aligned, usually a peer's memory).
GNIO_HD_INLINE void ll_store(std::uint64_t* pkt, const Pack& v, std::uint32_t flag) {
  const std::uint64_t f = static_cast<std::uint64_t>(flag) << 32;
  const std::uint64_t p0 = f | (v.lo & 0xffffffffu), p1 = f | (v.lo >> 32);
  const std::uint64_t p2 = f | (v.hi & 0xffffffffu), p3 = f | (v.hi >> 32);
#if GNIO_ON_DEVICE
  // Two 16-byte vector stores of two 8-byte elements each: every packet is one 8-byte access.
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(pkt), "l"(p0), "l"(p1) : "memory");
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(pkt + 2), "l"(p2), "l"(p3)
               : "memory");
#else
  dev::atomic_store(pkt + 0, p0, dev::Order::Relaxed);
  dev::atomic_store(pkt + 1, p1, dev::Order::Relaxed);
  dev::atomic_store(pkt + 2, p2, dev::Order::Relaxed);
  dev::atomic_store(pkt + 3, p3, dev::Order::Relaxed);
#endif
}

/// Reads the 4 packets of a unit at `pkt` (this rank's memory). True, with the data in `*out`,
/// when all carry `flag`; otherwise `*seen` is a flag that did not match.
GNIO_HD_INLINE bool ll_try_load(const std::uint64_t* pkt, std::uint32_t flag, Pack* out,
                                std::uint64_t* seen) {
  std::uint64_t p0, p1, p2, p3;
#if GNIO_ON_DEVICE
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(p0), "=l"(p1)
               : "l"(pkt)
               : "memory");
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(p2), "=l"(p3)
               : "l"(pkt + 2)
               : "memory");
#else
  p0 = dev::atomic_load(const_cast<std::uint64_t*>(pkt + 0), dev::Order::Relaxed);
  p1 = dev::atomic_load(const_cast<std::uint64_t*>(pkt + 1), dev::Order::Relaxed);
  p2 = dev::atomic_load(const_cast<std::uint64_t*>(pkt + 2), dev::Order::Relaxed);
  p3 = dev::atomic_load(const_cast<std::uint64_t*>(pkt + 3), dev::Order::Relaxed);
#endif
  const std::uint32_t f0 = static_cast<std::uint32_t>(p0 >> 32),
                      f1 = static_cast<std::uint32_t>(p1 >> 32);
  const std::uint32_t f2 = static_cast<std::uint32_t>(p2 >> 32),
                      f3 = static_cast<std::uint32_t>(p3 >> 32);
  if (f0 != flag || f1 != flag || f2 != flag || f3 != flag) {
    *seen = f0 != flag ? f0 : f1 != flag ? f1 : f2 != flag ? f2 : f3;
    return false;
  }
  out->lo = (p0 & 0xffffffffu) | (p1 << 32);
  out->hi = (p2 & 0xffffffffu) | (p3 << 32);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reduction of packs.

/// The type elements are reduced in: float for 16- and 8-bit floats, the type itself otherwise.
template <class T>
using acc_t = std::conditional_t<is_narrow_float_v<T>, float, T>;

template <class T>
GNIO_HD_INLINE acc_t<T> to_acc(T v) {
  if constexpr (is_narrow_float_v<T>)
    return to_float(v);
  else
    return v;
}
template <class T>
GNIO_HD_INLINE T from_acc(acc_t<T> v) {
  if constexpr (is_narrow_float_v<T>)
    return from_float<T>(v);
  else
    return v;
}

/// Reduces packs element by element: init() with the first operand, add() the next ones in
/// order, out() the result rounded to T. The same sequence gives the same bits everywhere.
template <class T, class Op, bool kBitwise = op::is_bitwise_v<Op>>
struct Accum {
  static constexpr int kN = static_cast<int>(kUnit / sizeof(T));
  acc_t<T> v[kN];

  GNIO_HD_INLINE void init(const Pack& p) {
    T t[kN];
    std::memcpy(static_cast<void*>(t), &p, kUnit);
    GNIO_UNROLL
    for (int i = 0; i < kN; ++i) v[i] = to_acc(t[i]);
  }
  GNIO_HD_INLINE void add(const Pack& p) {
    T t[kN];
    std::memcpy(static_cast<void*>(t), &p, kUnit);
    GNIO_UNROLL
    for (int i = 0; i < kN; ++i) v[i] = Op::apply(v[i], to_acc(t[i]));
  }
  GNIO_HD_INLINE Pack out() const {
    T t[kN];
    GNIO_UNROLL
    for (int i = 0; i < kN; ++i) t[i] = from_acc<T>(v[i]);
    Pack p;
    std::memcpy(&p, static_cast<const void*>(t), kUnit);
    return p;
  }
};

/// Bitwise operators do not care about element boundaries: two 64-bit words per pack.
template <class T, class Op>
struct Accum<T, Op, true> {
  std::uint64_t lo, hi;
  GNIO_HD_INLINE void init(const Pack& p) {
    lo = p.lo;
    hi = p.hi;
  }
  GNIO_HD_INLINE void add(const Pack& p) {
    lo = Op::apply(lo, p.lo);
    hi = Op::apply(hi, p.hi);
  }
  GNIO_HD_INLINE Pack out() const { return Pack{lo, hi}; }
};

/// Tag of the data-movement collectives (no reduction).
struct CopyOp {};
/// True for an operator (or operator set) that reduces, false for CopyOp.
template <class Ops>
inline constexpr bool kReduces = !std::is_same_v<Ops, CopyOp>;

/// A set of operators one kernel serves: the host API compiles one kernel per element type and
/// algorithm, and the call's operator (CollArgs::op) is chosen at run time around each data loop,
/// so the pipes, handshakes and waits are compiled once instead of once per operator while every
/// data loop stays specialised for its operator.
template <class... Ops>
struct AnyOp {};
/// The arithmetic operators (every element type) and the bitwise ones (integers, as bytes).
using ArithOps = AnyOp<op::Sum, op::Prod, op::Min, op::Max>;
using BitOps = AnyOp<op::BitAnd, op::BitOr, op::BitXor>;

/// Calls f(Op{}) for the operator of a call: `Ops` itself when it is one operator (the device
/// API: fixed at compile time), the member of an AnyOp whose kOp is `op` otherwise.
template <class Ops>
struct OpVisit {
  template <class F>
  static GNIO_HD_INLINE void visit(RedOp, F&& f) {
    f(Ops{});
  }
};
template <class... Ops>
struct OpVisit<AnyOp<Ops...>> {
  template <class F>
  static GNIO_HD_INLINE void visit(RedOp op, F&& f) {
    (void)((op == Ops::kOp ? (f(Ops{}), true) : false) || ...);
  }
};
template <class Ops, class F>
GNIO_HD_INLINE void visit_op(RedOp op, F&& f) {
  OpVisit<Ops>::visit(op, f);
}

}  // namespace gnio::detail
