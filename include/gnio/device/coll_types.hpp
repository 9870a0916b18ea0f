// Element types and reduction operators of gnio's collectives, usable in kernels and host code.
//
// * DataType / RedOp: the runtime names the host API takes (gnio/coll.hpp).
// * gnio::half and gnio::bfloat16: CUDA's __half and __nv_bfloat16 when compiled by nvcc; a
//   bit-identical 16-bit value type otherwise (host backend), converting to and from float with
//   round-to-nearest-even. Pass them between translation units compiled by different compilers as
//   bits (the same 2 bytes), never as a C++ type.
// * gnio::fp8_e4m3 / gnio::fp8_e5m2: the OCP 8-bit floats (E4M3: bias 7, no infinities, 448 max;
//   E5M2: bias 15, IEEE-like), with the same conversions on both backends. Float to fp8 rounds to
//   nearest even; values beyond the largest finite one become NaN (E4M3) or infinity (E5M2).
// * Operator tags (gnio::op::Sum, ...) select the reduction at compile time in the device API.
//   16-bit and 8-bit floats are reduced in float and rounded once per stored result.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gnio/device/macros.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace gnio {

/// Element type of a collective's buffers (host API).
enum class DataType : std::uint8_t {
  F32,     ///< float
  F16,     ///< gnio::half (IEEE binary16)
  BF16,    ///< gnio::bfloat16
  F64,     ///< double
  I32,     ///< std::int32_t
  I64,     ///< std::int64_t
  U8,      ///< std::uint8_t
  F8E4M3,  ///< gnio::fp8_e4m3
  F8E5M2,  ///< gnio::fp8_e5m2
};
/// Number of DataType values.
inline constexpr int kDataTypeCount = 9;

/// Reduction operator (host API). Bitwise operators apply to integer types only.
enum class RedOp : std::uint8_t { Sum, Prod, Min, Max, BitAnd, BitOr, BitXor };
/// Number of RedOp values.
inline constexpr int kRedOpCount = 7;

/// Bytes per element of `t` (0 for a value outside the enum).
GNIO_HD_INLINE constexpr std::size_t size_of(DataType t) {
  switch (t) {
    case DataType::F32:
    case DataType::I32: return 4;
    case DataType::F16:
    case DataType::BF16: return 2;
    case DataType::F64:
    case DataType::I64: return 8;
    case DataType::U8:
    case DataType::F8E4M3:
    case DataType::F8E5M2: return 1;
  }
  return 0;
}
/// True for the integer types (the ones bitwise operators accept).
GNIO_HD_INLINE constexpr bool is_integer(DataType t) {
  return t == DataType::I32 || t == DataType::I64 || t == DataType::U8;
}
/// True for And/Or/Xor.
GNIO_HD_INLINE constexpr bool is_bitwise(RedOp op) {
  return op == RedOp::BitAnd || op == RedOp::BitOr || op == RedOp::BitXor;
}

namespace detail {
GNIO_HD_INLINE std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
GNIO_HD_INLINE float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> IEEE binary16 bits, round to nearest even (overflow -> inf, NaN kept quiet).
GNIO_HD_INLINE std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    // value / 2^-24, rounded to nearest even; at most 1024 (the smallest normal, same encoding).
    const float scaled = bits_float(a) * 16777216.0f;    // exact: multiply by 2^24
    const float r = scaled + 12582912.0f - 12582912.0f;  // 1.5*2^23 trick: RNE to an integer
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const std::uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}
/// IEEE binary16 bits -> float (exact).
GNIO_HD_INLINE float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24
    return bits_float(float_bits(v) | sign);
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}
/// float -> bfloat16 bits, round to nearest even.
GNIO_HD_INLINE std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
GNIO_HD_INLINE float bf16_bits_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

/// OCP fp8 formats: E exponent bits, M mantissa bits, bias; E4M3 has no infinities and one NaN
/// mantissa (all ones) at the top exponent.
template <int E, int M, int Bias, bool HasInf>
struct Fp8Format {
  static GNIO_HD_INLINE float to_float(std::uint8_t b) {
    const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
    const std::uint32_t e = (b >> M) & ((1u << E) - 1), m = b & ((1u << M) - 1);
    const std::uint32_t emax = (1u << E) - 1;
    if (e == emax) {
      if (HasInf) return bits_float(sign | 0x7f800000u | (m << (23 - M)));
      if (m == (1u << M) - 1) return bits_float(0x7fc00000u | sign);
    }
    if (e == 0) {
      // m * 2^(1 - Bias - M), exact in float.
      const float v =
          static_cast<float>(m) * bits_float(static_cast<std::uint32_t>(127 + 1 - Bias - M) << 23);
      return bits_float(float_bits(v) | sign);
    }
    return bits_float(sign | ((e + 127u - Bias) << 23) | (m << (23 - M)));
  }
  static GNIO_HD_INLINE std::uint8_t from_float(float f) {
    const std::uint32_t x = float_bits(f);
    const std::uint8_t sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
    const std::uint32_t a = x & 0x7fffffffu;
    const std::uint8_t nan = 0x7fu;  // a NaN in both formats
    const std::uint8_t overflow =
        static_cast<std::uint8_t>(HasInf ? ((((1u << E) - 1) << M)) : 0x7fu);
    if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | nan);
    const std::uint32_t min_normal = static_cast<std::uint32_t>(127 + 1 - Bias) << 23;
    std::uint32_t code;
    if (a < min_normal) {
      // Subnormal: value / 2^(1-Bias-M) rounded to nearest even (an integer <= 2^M, and 2^M is
      // the smallest normal's encoding).
      const float scaled =
          bits_float(a) * bits_float(static_cast<std::uint32_t>(127 - (1 - Bias - M)) << 23);
      code = static_cast<std::uint32_t>(scaled + 12582912.0f - 12582912.0f);
    } else {
      const std::uint32_t shift = 23 - M;
      const std::uint32_t rounded = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1u);
      code = (rounded >> shift) - (static_cast<std::uint32_t>(127 - Bias) << M);
    }
    const std::uint32_t max_finite = HasInf ? ((((1u << E) - 2) << M) | ((1u << M) - 1)) : 0x7eu;
    if (code > max_finite) return static_cast<std::uint8_t>(sign | overflow);
    return static_cast<std::uint8_t>(sign | code);
  }
};
using E4M3Format = Fp8Format<4, 3, 7, false>;
using E5M2Format = Fp8Format<5, 2, 15, true>;
}  // namespace detail

#if defined(__CUDACC__)
/// IEEE binary16: CUDA's __half under nvcc.
using half = __half;
/// bfloat16: CUDA's __nv_bfloat16 under nvcc.
using bfloat16 = __nv_bfloat16;
#else
/// IEEE binary16, bit-compatible with CUDA's __half (host backend build).
struct half {
  std::uint16_t bits;
  half() = default;
  GNIO_HD_INLINE half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT: like __half
  GNIO_HD_INLINE operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
};
/// bfloat16, bit-compatible with CUDA's __nv_bfloat16 (host backend build).
struct bfloat16 {
  std::uint16_t bits;
  bfloat16() = default;
  GNIO_HD_INLINE bfloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}           // NOLINT
  GNIO_HD_INLINE operator float() const { return detail::bf16_bits_to_float(bits); }  // NOLINT
};
#endif
static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2, "16-bit floats are 2 bytes");

/// OCP FP8 E4M3 (bias 7, finite max 448, NaN = S.1111.111).
struct fp8_e4m3 {
  std::uint8_t bits;
  fp8_e4m3() = default;
  GNIO_HD_INLINE explicit fp8_e4m3(float f) : bits(detail::E4M3Format::from_float(f)) {}
  GNIO_HD_INLINE explicit operator float() const { return detail::E4M3Format::to_float(bits); }
};
/// OCP FP8 E5M2 (bias 15, finite max 57344, infinities and NaNs as in IEEE).
struct fp8_e5m2 {
  std::uint8_t bits;
  fp8_e5m2() = default;
  GNIO_HD_INLINE explicit fp8_e5m2(float f) : bits(detail::E5M2Format::from_float(f)) {}
  GNIO_HD_INLINE explicit operator float() const { return detail::E5M2Format::to_float(bits); }
};

namespace detail {
/// An element type's conversions to and from float: its own, except under nvcc for CUDA's 16-bit
/// types, whose intrinsics name the rounding (their conversion operators depend on
/// __CUDA_NO_HALF_CONVERSIONS__ and the like).
template <class T>
struct FloatConversion {
  static GNIO_HD_INLINE float to(T v) { return static_cast<float>(v); }
  static GNIO_HD_INLINE T from(float f) { return static_cast<T>(f); }
};
#if defined(__CUDACC__)
template <>
struct FloatConversion<half> {
  static GNIO_HD_INLINE float to(half v) { return __half2float(v); }
  static GNIO_HD_INLINE half from(float f) { return __float2half_rn(f); }
};
template <>
struct FloatConversion<bfloat16> {
  static GNIO_HD_INLINE float to(bfloat16 v) { return __bfloat162float(v); }
  static GNIO_HD_INLINE bfloat16 from(float f) { return __float2bfloat16_rn(f); }
};
#endif
}  // namespace detail

/// Any element type -> float (16/8-bit floats exactly; others by conversion).
template <class T>
GNIO_HD_INLINE float to_float(T v) {
  return detail::FloatConversion<T>::to(v);
}
/// float -> any element type (16/8-bit floats round to nearest even).
template <class T>
GNIO_HD_INLINE T from_float(float f) {
  return detail::FloatConversion<T>::from(f);
}

/// True for the types reduced in float (16- and 8-bit floats).
template <class T>
inline constexpr bool is_narrow_float_v =
    std::is_same_v<T, half> || std::is_same_v<T, bfloat16> || std::is_same_v<T, fp8_e4m3> ||
    std::is_same_v<T, fp8_e5m2>;

/// The DataType of an element type (for the types collectives support).
template <class T>
constexpr DataType data_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return DataType::F32;
  else if constexpr (std::is_same_v<T, half>)
    return DataType::F16;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return DataType::BF16;
  else if constexpr (std::is_same_v<T, double>)
    return DataType::F64;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DataType::I32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DataType::I64;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DataType::U8;
  else if constexpr (std::is_same_v<T, fp8_e4m3>)
    return DataType::F8E4M3;
  else {
    static_assert(std::is_same_v<T, fp8_e5m2>,
                  "collectives support f32, f16, bf16, f64, i32, i64, u8, fp8");
    return DataType::F8E5M2;
  }
}

/// Reduction operator tags for the device API: `cc.allreduce<Block>(in, out, n, gnio::op::Sum{})`.
/// Each has `apply(a, b)` on the accumulation type (float for 16/8-bit floats) and the RedOp it
/// names. Integer sums and products wrap (two's complement), as in NCCL.
namespace op {

namespace detail {
template <class A>
GNIO_HD_INLINE A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class A>
GNIO_HD_INLINE A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    // uint8 promotes to int: multiply in unsigned int so that nothing overflows a signed type.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<A>(
        static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}
}  // namespace detail

struct Sum {
  static constexpr RedOp kOp = RedOp::Sum;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return detail::wrap_add(a, b);
  }
};
struct Prod {
  static constexpr RedOp kOp = RedOp::Prod;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return detail::wrap_mul(a, b);
  }
};
struct Min {
  static constexpr RedOp kOp = RedOp::Min;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return b < a ? b : a;
  }
};
struct Max {
  static constexpr RedOp kOp = RedOp::Max;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return a < b ? b : a;
  }
};
struct BitAnd {
  static constexpr RedOp kOp = RedOp::BitAnd;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return static_cast<A>(a & b);
  }
};
struct BitOr {
  static constexpr RedOp kOp = RedOp::BitOr;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return static_cast<A>(a | b);
  }
};
struct BitXor {
  static constexpr RedOp kOp = RedOp::BitXor;
  template <class A>
  static GNIO_HD_INLINE A apply(A a, A b) {
    return static_cast<A>(a ^ b);
  }
};

/// True for BitAnd/BitOr/BitXor.
template <class Op>
inline constexpr bool is_bitwise_v =
    std::is_same_v<Op, BitAnd> || std::is_same_v<Op, BitOr> || std::is_same_v<Op, BitXor>;

}  // namespace op

}  // namespace gnio
