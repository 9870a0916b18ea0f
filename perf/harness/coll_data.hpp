// Exact data for checking collectives, shared by gnio-perf coll and the collective tests
// (tests/coll): inputs chosen nccl-tests style so that every partial result of every reduction
// order is exactly representable (so every algorithm must produce the expected bits), expected
// results computed independently on the host, the poison byte, and the buffer layout of one
// checked call (what goes in, where the output lands, what must stay poisoned).
//
// Inputs are periodic in the element index (kInputPeriod, an odd prime, so no power-of-two chunk
// size lines up with it): a benchmark generates one period per (rank, type, operator) and tiles
// it, which keeps the checks of GiB-sized buffers at memcpy speed.
//
// Host-only code, but it compiles under nvcc too (the GPU tests include it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gnio/coll.hpp"

namespace gnio_bench {

using gnio::CollKind;
using gnio::DataType;
using gnio::RedOp;

/// Every element type, in DataType order.
inline constexpr DataType kAllTypes[] = {DataType::F32, DataType::F16,    DataType::BF16,
                                         DataType::F64, DataType::I32,    DataType::I64,
                                         DataType::U8,  DataType::F8E4M3, DataType::F8E5M2};
/// The operators every type has.
inline constexpr RedOp kArithOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max};
/// The operators only integer types have.
inline constexpr RedOp kBitOps[] = {RedOp::BitAnd, RedOp::BitOr, RedOp::BitXor};

/// Inputs repeat every kInputPeriod elements (a prime: shifted or misplaced chunks still differ).
inline constexpr std::size_t kInputPeriod = 65537;
/// The byte every checked output is filled with before the call (never an input byte pattern
/// that a correct result could reproduce: inputs stay well inside every type's range).
inline constexpr std::uint8_t kPoison = 0xA5;

/// True for the collectives that reduce (and so take an operator).
inline bool is_reducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce;
}
/// True for the types with negative values.
inline bool is_signed(DataType t) {
  return t != DataType::U8;
}
/// True when (t, op) is a valid combination (bitwise operators need an integer type).
inline bool type_has_op(DataType t, RedOp op) {
  return !gnio::is_bitwise(op) || gnio::is_integer(t);
}
/// True when the inputs below keep every partial result of (t, op) exact over `ranks` ranks: the
/// narrow floats' sums and products are sized for at most 8 ranks (f16/bf16 sums for 32); wider
/// types and min/max/bitwise hold for any count.
inline bool inputs_exact(DataType t, RedOp op, int ranks) {
  if (op != RedOp::Sum && op != RedOp::Prod) return true;
  switch (t) {
    case DataType::F8E4M3:
    case DataType::F8E5M2: return ranks <= 8;
    case DataType::F16:
    case DataType::BF16: return op == RedOp::Sum ? ranks <= 32 : ranks <= 8;
    default: return true;
  }
}

/// A 64-bit mixing function (splitmix64's finaliser).
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Input element i of rank r for an arithmetic operator (or a copy collective: op = Sum). Small
/// integers chosen so that every partial sum/product/min/max over up to 8 ranks is exact in t
/// (see inputs_exact for more ranks).
inline double input_value(DataType t, RedOp op, int r, std::size_t i) {
  i %= kInputPeriod;
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
  const std::uint64_t h =
      mix((i % kInputPeriod) * 1000003ull + static_cast<std::uint64_t>(r) * 7919ull);
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
      // Through int64: a wrapped sum (> 255) converts modulo 256, as the device's wrapping add.
      const std::uint8_t x = static_cast<std::uint8_t>(std::llround(v));
      std::memcpy(dst, &x, 1);
      break;
    }
  }
}
/// Writes the low size_of(t) bytes of `bits` at `dst` (little endian).
inline void encode_bits(DataType t, std::uint64_t bits, void* dst) {
  std::memcpy(dst, &bits, gnio::size_of(t));
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

/// One period of a sequence of elements that repeats every kInputPeriod (an input or an expected
/// reduction), generated once and copied out in runs.
class PeriodicElements {
 public:
  /// Generates elements [0, min(needed, kInputPeriod)) with gen(i, dst) (es bytes each).
  template <class Gen>
  PeriodicElements(std::size_t es, std::size_t needed, Gen gen)
      : es_(es), bytes_(std::min(needed, kInputPeriod) * es) {
    for (std::size_t i = 0; i * es_ < bytes_.size(); ++i) gen(i, bytes_.data() + i * es_);
  }
  /// Writes elements [first, first + count) at dst. first + count must not exceed `needed`.
  void write(std::size_t first, std::size_t count, std::uint8_t* dst) const {
    const std::size_t period = bytes_.size() / es_;
    while (count) {
      const std::size_t at = first % period;
      const std::size_t run = std::min(count, period - at);
      std::memcpy(dst, bytes_.data() + at * es_, run * es_);
      dst += run * es_;
      first += run;
      count -= run;
    }
  }

 private:
  std::size_t es_;
  std::vector<std::uint8_t> bytes_;
};

/// Alltoallv's element count from rank `from` to rank `to` for a nominal per-peer count `base`:
/// 2/3, 1 or 4/3 of it, rotating with both ranks (uneven, zeros for tiny bases), so every rank
/// sends and receives about n * base elements, as alltoall with count `base` would.
inline std::size_t alltoallv_count(std::size_t base, int from, int to) {
  const std::size_t k = 2 + static_cast<std::size_t>(from + 2 * to) % 3;
  return base * k / 3;
}

/// One rank's part of one collective call, in NCCL's conventions (gnio/coll.hpp): counts per
/// rank; in place, one buffer holds both send and recv.
struct CollCall {
  CollKind kind = CollKind::AllReduce;
  DataType type = DataType::F32;
  RedOp op = RedOp::Sum;  ///< ignored by the copying collectives (their inputs are Sum's)
  int ranks = 1;
  int rank = 0;
  std::size_t count = 0;  ///< the API's count (alltoallv: the nominal per-peer count)
  int root = 0;
  bool in_place = false;
  // alltoallv only: per-peer counts and displacements (elements), packed in rank order.
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
};

/// The operator whose inputs `c` uses: its own for reductions, Sum for the copying collectives.
inline RedOp input_op(const CollCall& c) {
  return is_reducing(c.kind) ? c.op : RedOp::Sum;
}

/// Fills the alltoallv counts and displacements of `c` from its nominal count.
inline void set_alltoallv_layout(CollCall& c) {
  const std::size_t n = static_cast<std::size_t>(c.ranks);
  c.send_counts.assign(n, 0);
  c.send_displs.assign(n, 0);
  c.recv_counts.assign(n, 0);
  c.recv_displs.assign(n, 0);
  std::size_t s = 0, r = 0;
  for (int q = 0; q < c.ranks; ++q) {
    const std::size_t qi = static_cast<std::size_t>(q);
    c.send_counts[qi] = alltoallv_count(c.count, c.rank, q);
    c.send_displs[qi] = s;
    s += c.send_counts[qi];
    c.recv_counts[qi] = alltoallv_count(c.count, q, c.rank);
    c.recv_displs[qi] = r;
    r += c.recv_counts[qi];
  }
}

/// Elements of the send buffer of `c` on its rank.
inline std::size_t send_elements(const CollCall& c) {
  const std::size_t n = static_cast<std::size_t>(c.ranks);
  switch (c.kind) {
    case CollKind::ReduceScatter:
    case CollKind::AllToAll: return n * c.count;
    case CollKind::AllToAllV:
      return c.send_displs.empty() ? 0 : c.send_displs.back() + c.send_counts.back();
    default: return c.count;
  }
}
/// Elements of the recv buffer of `c` on its rank.
inline std::size_t recv_elements(const CollCall& c) {
  const std::size_t n = static_cast<std::size_t>(c.ranks);
  switch (c.kind) {
    case CollKind::AllGather:
    case CollKind::AllToAll: return n * c.count;
    case CollKind::AllToAllV:
      return c.recv_displs.empty() ? 0 : c.recv_displs.back() + c.recv_counts.back();
    default: return c.count;
  }
}
/// In place: element offsets of send and recv inside the one buffer (NCCL's rules).
inline std::size_t in_place_send_at(const CollCall& c) {
  return c.kind == CollKind::AllGather ? static_cast<std::size_t>(c.rank) * c.count : 0;
}
inline std::size_t in_place_recv_at(const CollCall& c) {
  return c.kind == CollKind::ReduceScatter ? static_cast<std::size_t>(c.rank) * c.count : 0;
}
/// Elements of the buffer a check compares: the recv buffer (out of place) or the one shared
/// buffer (in place), without the guard.
inline std::size_t checked_elements(const CollCall& c) {
  return c.in_place ? std::max(send_elements(c), recv_elements(c)) : recv_elements(c);
}

/// This rank's send buffer content for `c` (send_elements(c) elements).
inline std::vector<std::uint8_t> make_input(const CollCall& c) {
  const std::size_t es = gnio::size_of(c.type), elems = send_elements(c);
  std::vector<std::uint8_t> in(elems * es);
  const PeriodicElements p(es, elems, [&](std::size_t i, std::uint8_t* dst) {
    input_element(c.type, input_op(c), c.rank, i, dst);
  });
  p.write(0, elems, in.data());
  return in;
}

/// The checked buffer before the call: poison everywhere (guard_elements more behind it), with
/// the input in place when `c` is in place.
inline std::vector<std::uint8_t> make_initial(const CollCall& c,
                                              const std::vector<std::uint8_t>& input,
                                              std::size_t guard_elements) {
  const std::size_t es = gnio::size_of(c.type);
  std::vector<std::uint8_t> init((checked_elements(c) + guard_elements) * es, kPoison);
  if (c.in_place) std::copy(input.begin(), input.end(), init.begin() + in_place_send_at(c) * es);
  return init;
}

/// The checked buffer after a correct call: `initial` with the output written where it belongs
/// (reduce writes on the root only; every other byte keeps its value).
inline std::vector<std::uint8_t> make_expected(const CollCall& c,
                                               const std::vector<std::uint8_t>& initial) {
  const std::size_t es = gnio::size_of(c.type);
  const std::size_t me = static_cast<std::size_t>(c.rank);
  std::vector<std::uint8_t> want = initial;
  std::uint8_t* out = want.data() + (c.in_place ? in_place_recv_at(c) * es : 0);
  auto reduction = [&](std::size_t needed) {
    return PeriodicElements(es, needed, [&](std::size_t i, std::uint8_t* dst) {
      expected_reduction(c.type, c.op, c.ranks, i, dst);
    });
  };
  auto input_of = [&](int r, std::size_t needed) {
    return PeriodicElements(es, needed, [&](std::size_t i, std::uint8_t* dst) {
      input_element(c.type, input_op(c), r, i, dst);
    });
  };
  switch (c.kind) {
    case CollKind::AllReduce: reduction(c.count).write(0, c.count, out); break;
    case CollKind::ReduceScatter:
      reduction((me + 1) * c.count).write(me * c.count, c.count, out);
      break;
    case CollKind::Reduce:
      if (c.rank == c.root) reduction(c.count).write(0, c.count, out);
      break;
    case CollKind::Broadcast: input_of(c.root, c.count).write(0, c.count, out); break;
    case CollKind::AllGather:
      for (int r = 0; r < c.ranks; ++r)
        input_of(r, c.count).write(0, c.count, out + static_cast<std::size_t>(r) * c.count * es);
      break;
    case CollKind::AllToAll:
      for (int r = 0; r < c.ranks; ++r)
        input_of(r, (me + 1) * c.count)
            .write(me * c.count, c.count, out + static_cast<std::size_t>(r) * c.count * es);
      break;
    case CollKind::AllToAllV:
      for (int r = 0; r < c.ranks; ++r) {
        // Rank r's block for this rank starts at its send displacement for this rank.
        std::size_t displ = 0;
        for (int q = 0; q < c.rank; ++q) displ += alltoallv_count(c.count, r, q);
        const std::size_t cnt = c.recv_counts[static_cast<std::size_t>(r)];
        if (cnt)
          input_of(r, displ + cnt)
              .write(displ, cnt, out + c.recv_displs[static_cast<std::size_t>(r)] * es);
      }
      break;
  }
  return want;
}

/// Elements (es bytes each) of `got` that differ from `want`; calls report(index) for the first
/// `report_max` of them.
template <class Report>
std::size_t count_wrong_elements(const std::uint8_t* got, const std::uint8_t* want,
                                 std::size_t bytes, std::size_t es, std::size_t report_max,
                                 Report report) {
  if (std::memcmp(got, want, bytes) == 0) return 0;
  std::size_t wrong = 0;
  for (std::size_t e = 0; e < bytes / es; ++e)
    if (std::memcmp(got + e * es, want + e * es, es) != 0 && wrong++ < report_max) report(e);
  return wrong;
}

}  // namespace gnio_bench
