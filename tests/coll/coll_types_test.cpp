// The element types of the collectives: gnio::half / gnio::bfloat16 / fp8 conversions (exact
// round trips of every code, round-to-nearest-even, overflow), the reduction operators, and,
// when compiled by nvcc, agreement with CUDA's own conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gnio/coll.hpp"
#include "gnio/device/impl/coll_pack.hpp"

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

namespace {

template <class T>
std::uint32_t bits_of(T v) {
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(std::uint32_t b) {
  T v;
  std::memcpy(static_cast<void*>(&v), &b, sizeof(T));
  return v;
}

template <class T>
void check_round_trips(std::uint32_t codes) {
  for (std::uint32_t b = 0; b < codes; ++b) {
    const float f = gnio::to_float(from_bits<T>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(gnio::to_float(gnio::from_float<T>(f)))) << b;
      continue;
    }
    EXPECT_EQ(bits_of(gnio::from_float<T>(f)), b) << "code " << b << " = " << f;
  }
}

TEST(CollTypes, EveryCodeRoundTrips) {
  check_round_trips<gnio::half>(1u << 16);
  check_round_trips<gnio::bfloat16>(1u << 16);
  check_round_trips<gnio::fp8_e4m3>(1u << 8);
  check_round_trips<gnio::fp8_e5m2>(1u << 8);
}

TEST(CollTypes, Fp8KnownValues) {
  auto e4 = [](float f) { return bits_of(gnio::fp8_e4m3(f)); };
  auto e5 = [](float f) { return bits_of(gnio::fp8_e5m2(f)); };
  EXPECT_EQ(e4(1.0f), 0x38u);
  EXPECT_EQ(e4(-2.0f), 0xc0u);
  EXPECT_EQ(e4(448.0f), 0x7eu);
  EXPECT_EQ(e4(0.001953125f), 0x01u);     // 2^-9, the smallest subnormal
  EXPECT_EQ(e4(1.0625f), 0x38u);          // halfway 1.0 / 1.125: to even (1.0)
  EXPECT_EQ(e4(1.1875f), 0x3au);          // halfway 1.125 / 1.25: to even (1.25)
  EXPECT_EQ(e4(1000.0f) & 0x7fu, 0x7fu);  // beyond 448: NaN (no infinities)
  EXPECT_EQ(e5(1.0f), 0x3cu);
  EXPECT_EQ(e5(57344.0f), 0x7bu);
  EXPECT_EQ(e5(1e6f), 0x7cu);  // infinity
  EXPECT_EQ(e5(-1e6f), 0xfcu);
  EXPECT_EQ(e5(1.5f * 0.0000152587890625f), 0x02u);  // 1.5 * 2^-16: halfway 1/2 -> 2 (even)
  for (int i = -16; i <= 16; ++i)
    EXPECT_EQ(static_cast<float>(gnio::fp8_e4m3(static_cast<float>(i))), static_cast<float>(i));
  for (int i = -8; i <= 8; ++i)
    EXPECT_EQ(static_cast<float>(gnio::fp8_e5m2(static_cast<float>(i))), static_cast<float>(i));
}

TEST(CollTypes, HalfAndBfloat16KnownValues) {
  EXPECT_EQ(bits_of(gnio::from_float<gnio::half>(1.0f)), 0x3c00u);
  EXPECT_EQ(bits_of(gnio::from_float<gnio::half>(65504.0f)), 0x7bffu);
  EXPECT_EQ(bits_of(gnio::from_float<gnio::half>(65520.0f)), 0x7c00u);  // rounds to infinity
  EXPECT_EQ(bits_of(gnio::from_float<gnio::half>(5.9604644775390625e-08f)), 0x0001u);
  EXPECT_EQ(bits_of(gnio::from_float<gnio::half>(1.00048828125f)), 0x3c00u);  // halfway: even
  EXPECT_EQ(bits_of(gnio::from_float<gnio::bfloat16>(1.0f)), 0x3f80u);
  EXPECT_EQ(bits_of(gnio::from_float<gnio::bfloat16>(1.00390625f)), 0x3f80u);  // halfway: even
  EXPECT_EQ(bits_of(gnio::from_float<gnio::bfloat16>(1.01171875f)), 0x3f82u);  // halfway: even
}

#if defined(__CUDACC__)
// The conversions agree with CUDA's (non-saturating) ones for every half value and some more.
TEST(CollTypes, Fp8MatchesCuda) {
  for (std::uint32_t b = 0; b < (1u << 16); ++b) {
    const float f = gnio::to_float(from_bits<gnio::half>(b)) * 3.0f;
    if (std::isnan(f)) continue;
    const unsigned cuda4 = __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E4M3);
    const unsigned cuda5 = __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E5M2);
    const unsigned ours4 = bits_of(gnio::fp8_e4m3(f)), ours5 = bits_of(gnio::fp8_e5m2(f));
    if ((cuda4 & 0x7f) == 0x7f)
      EXPECT_EQ(ours4 & 0x7f, 0x7fu) << f;
    else
      EXPECT_EQ(ours4, cuda4) << f;
    if ((cuda5 & 0x7f) > 0x7c)
      EXPECT_GT(ours5 & 0x7f, 0x7cu) << f;
    else
      EXPECT_EQ(ours5, cuda5) << f;
  }
}
#endif

TEST(CollTypes, OperatorsAndAccumulation) {
  using gnio::detail::Accum;
  using gnio::detail::Pack;
  // Integer sums and products wrap.
  EXPECT_EQ(gnio::op::Sum::apply<std::int32_t>(2147483647, 1), -2147483647 - 1);
  EXPECT_EQ(gnio::op::Prod::apply<std::uint8_t>(200, 2), 144);
  EXPECT_EQ(gnio::op::Min::apply<double>(-1.0, 2.0), -1.0);
  EXPECT_EQ(gnio::op::Max::apply<std::int64_t>(-1, 2), 2);
  // Half sums accumulate in float: 2048 + 1 + 1 rounds once (2050), not per step (2048).
  Pack a{}, b{};
  gnio::half h[8];
  for (auto& x : h) x = gnio::from_float<gnio::half>(2048.0f);
  std::memcpy(&a, static_cast<const void*>(h), 16);
  for (auto& x : h) x = gnio::from_float<gnio::half>(1.0f);
  std::memcpy(&b, static_cast<const void*>(h), 16);
  Accum<gnio::half, gnio::op::Sum> acc{};
  acc.init(a);
  acc.add(b);
  acc.add(b);
  const Pack r = acc.out();
  std::memcpy(static_cast<void*>(h), &r, 16);
  EXPECT_EQ(gnio::to_float(h[0]), 2050.0f);
  // Bitwise on packs.
  Accum<std::uint8_t, gnio::op::BitXor> x{};
  x.init(Pack{0xff00ff00ff00ff00ull, 1});
  x.add(Pack{0x0ff00ff00ff00ff0ull, 3});
  EXPECT_EQ(x.out().lo, 0xf0f0f0f0f0f0f0f0ull);
  EXPECT_EQ(x.out().hi, 2u);
}

TEST(CollTypes, Names) {
  EXPECT_STREQ(gnio::to_string(gnio::DataType::BF16), "bf16");
  EXPECT_STREQ(gnio::to_string(gnio::RedOp::BitXor), "xor");
  EXPECT_STREQ(gnio::to_string(gnio::CollAlgo::TwoShot), "twoshot");
  EXPECT_STREQ(gnio::to_string(gnio::CollKind::ReduceScatter), "reduce_scatter");
  EXPECT_EQ(gnio::size_of(gnio::DataType::F8E5M2), 1u);
  EXPECT_TRUE(gnio::is_integer(gnio::DataType::U8));
  EXPECT_FALSE(gnio::is_integer(gnio::DataType::F16));
}

}  // namespace
