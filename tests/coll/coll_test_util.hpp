// Shared pieces of the collective tests: exactly representable inputs (nccl-tests style: every
// partial result of every reduction order is exact, so every algorithm must produce the expected
// bits), expected results computed independently on the host, poisoned outputs and #wrong counts.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/gnio_test.hpp"
#include "gnio/coll.hpp"

namespace coll_test {

using gnio::CollAlgo;
using gnio::CollKind;
using gnio::DataType;
using gnio::RedOp;

inline const DataType kAllTypes[] = {DataType::F32, DataType::F16,    DataType::BF16,
                                     DataType::F64, DataType::I32,    DataType::I64,
                                     DataType::U8,  DataType::F8E4M3, DataType::F8E5M2};
inline const RedOp kArithOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max};
inline const RedOp kBitOps[] = {RedOp::BitAnd, RedOp::BitOr, RedOp::BitXor};

inline bool is_signed(DataType t) {
  return t != DataType::U8;
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Input element i of rank r for an arithmetic operator (or a copy collective: op = Sum). Small
/// integers chosen so that every partial sum/product/min/max over up to 8 ranks is exact in t.
inline double input_value(DataType t, RedOp op, int r, std::size_t i) {
  const std::size_t ri = static_cast<std::size_t>(r);
  if (op == RedOp::Prod) {
    double v = (i + ri) % 5 == 0 ? 2.0 : 1.0;  // at most two 2s among 8 ranks
    if (is_signed(t) && (i * 3 + ri) % 7 == 0) v = -v;
    return v;
  }
  if (op == RedOp::Sum) {
    const std::size_t h = i * 7 + ri * 13;
    switch (t) {
      case DataType::F16: return static_cast<double>(h % 129) - 64;             // |sum| <= 512
      case DataType::BF16: return static_cast<double>(h % 17) - 8;              // |sum| <= 64
      case DataType::F8E4M3: return static_cast<double>((i * 3 + ri) % 4) - 1;  // [-8, 16]
      case DataType::F8E5M2: return static_cast<double>((i * 3 + ri) % 3) - 1;  // [-8, 8]
      case DataType::U8: return static_cast<double>(h % 20);                    // <= 152
      default: return static_cast<double>(h % 2001) - 1000;
    }
  }
  const std::size_t h = i * 31 + ri * 17;  // Min / Max: any exact values
  switch (t) {
    case DataType::BF16: return static_cast<double>(h % 257) - 128;
    case DataType::F8E4M3: return static_cast<double>(h % 33) - 16;
    case DataType::F8E5M2: return static_cast<double>(h % 17) - 8;
    case DataType::U8: return static_cast<double>(h % 160);
    default: return static_cast<double>(h % 2001) - 1000;  // f16 holds these exactly too
  }
}

/// Input bits of element i of rank r for a bitwise operator (top bit clear: never the poison).
inline std::uint64_t input_bits(DataType t, int r, std::size_t i) {
  const std::uint64_t h = mix(i * 1000003ull + static_cast<std::uint64_t>(r) * 7919ull);
  switch (t) {
    case DataType::U8: return h & 0x7f;
    case DataType::I32: return h & 0x7fffffff;
    default: return h & 0x7fffffffffffffffull;
  }
}

/// Writes `v` as one element of type t at `dst`.
inline void encode(DataType t, double v, void* dst) {
  switch (t) {
    case DataType::F32: {
      const float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case DataType::F64: std::memcpy(dst, &v, 8); break;
    case DataType::F16: {
      const gnio::half x = gnio::from_float<gnio::half>(static_cast<float>(v));
      std::memcpy(dst, &x, 2);
      break;
    }
    case DataType::BF16: {
      const gnio::bfloat16 x = gnio::from_float<gnio::bfloat16>(static_cast<float>(v));
      std::memcpy(dst, &x, 2);
      break;
    }
    case DataType::F8E4M3: {
      const gnio::fp8_e4m3 x(static_cast<float>(v));
      std::memcpy(dst, &x, 1);
      break;
    }
    case DataType::F8E5M2: {
      const gnio::fp8_e5m2 x(static_cast<float>(v));
      std::memcpy(dst, &x, 1);
      break;
    }
    case DataType::I32: {
      const std::int32_t x = static_cast<std::int32_t>(std::llround(v));
      std::memcpy(dst, &x, 4);
      break;
    }
    case DataType::I64: {
      const std::int64_t x = std::llround(v);
      std::memcpy(dst, &x, 8);
      break;
    }
    case DataType::U8: {
      const std::uint8_t x = static_cast<std::uint8_t>(std::llround(v));
      std::memcpy(dst, &x, 1);
      break;
    }
  }
}
inline void encode_bits(DataType t, std::uint64_t bits, void* dst) {
  std::memcpy(dst, &bits, gnio::size_of(t));  // little endian: the low bytes
}

/// Writes element i of rank r's input for (t, op) at dst.
inline void input_element(DataType t, RedOp op, int r, std::size_t i, void* dst) {
  if (gnio::is_bitwise(op))
    encode_bits(t, input_bits(t, r, i), dst);
  else
    encode(t, input_value(t, op, r, i), dst);
}

/// The reduction over ranks 0..n-1 of element i (index into each rank's input), as bytes.
inline void expected_reduction(DataType t, RedOp op, int n, std::size_t i, void* dst) {
  if (gnio::is_bitwise(op)) {
    std::uint64_t acc = input_bits(t, 0, i);
    for (int r = 1; r < n; ++r) {
      const std::uint64_t x = input_bits(t, r, i);
      acc = op == RedOp::BitAnd ? (acc & x) : op == RedOp::BitOr ? (acc | x) : (acc ^ x);
    }
    encode_bits(t, acc, dst);
    return;
  }
  double acc = input_value(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    const double x = input_value(t, op, r, i);
    switch (op) {
      case RedOp::Sum: acc += x; break;
      case RedOp::Prod: acc *= x; break;
      case RedOp::Min: acc = x < acc ? x : acc; break;
      default: acc = x > acc ? x : acc; break;
    }
  }
  encode(t, acc, dst);
}

inline constexpr std::uint8_t kPoison = 0xA5;

/// Counts elements of `got` (es bytes each) that differ from `want`; reports the first few.
inline std::size_t count_wrong(const std::vector<std::uint8_t>& got,
                               const std::vector<std::uint8_t>& want, std::size_t es,
                               const std::string& what) {
  std::size_t wrong = 0;
  const std::size_t elems = got.size() / es;
  for (std::size_t e = 0; e < elems; ++e) {
    if (std::memcmp(got.data() + e * es, want.data() + e * es, es) != 0) {
      if (wrong < 4) {
        std::string g, w;
        char buf[8];
        for (std::size_t b = 0; b < es; ++b) {
          std::snprintf(buf, sizeof(buf), "%02x", got[e * es + es - 1 - b]);
          g += buf;
          std::snprintf(buf, sizeof(buf), "%02x", want[e * es + es - 1 - b]);
          w += buf;
        }
        ADD_FAILURE() << what << ": element " << e << " is 0x" << g << ", expected 0x" << w;
      }
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace coll_test
