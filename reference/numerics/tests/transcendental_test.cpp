// docs/numerics.md 1.5: the portable fp32 exp and cos against a float64 libm oracle (exp within 2 ulp over
// every finite input, cos within 1 ulp over the |x| <= 64 it accepts, docs/routing.md 3.4), their special
// values, and golden points whose expected bits are the correctly rounded values (computed with mpmath at
// 200 bits, independent of the code under test). The sweeps visit every 61st or 257th float of a range and
// every float of a few narrow ranges (overflow, subnormal results, tiny cos arguments): about 70 million
// evaluations, a few seconds.
#include "reference/numerics/transcendental.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include <gtest/gtest.h>

namespace eps {
namespace {

// Distance in units in the last place: the difference of the two floats' positions on the ordered line of
// fp32 values (adjacent floats are 1 apart, +0 and -0 coincide).
std::int64_t ordered_position(float f) {
  const std::uint32_t bits = float_bits(f);
  const auto magnitude = static_cast<std::int64_t>(bits & 0x7fffffffu);
  return (bits & 0x80000000u) != 0 ? -magnitude : magnitude;
}

std::int64_t ulp_distance(float a, float b) { return std::llabs(ordered_position(a) - ordered_position(b)); }

float oracle_exp(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
float oracle_cos(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }

// What a sweep over the floats with bit patterns first, first + stride, ... <= last found.
struct Sweep {
  std::int64_t worst_ulp = 0;  // largest ulp distance from the float64 oracle among finite results
  std::int64_t other_defects =
      0;  // exp: +inf where the oracle is finite or the reverse; cos: not even or |cos| > 1
};

Sweep sweep_exp(std::uint32_t first, std::uint32_t last, std::uint32_t stride) {
  Sweep sweep;
  for (std::uint64_t bits = first; bits <= last; bits += stride) {
    const float x = bits_float(static_cast<std::uint32_t>(bits));
    const float got = portable_exp(x);
    const float want = oracle_exp(x);
    if (std::isinf(want) || std::isinf(got)) {
      sweep.other_defects += got != want;  // overflow exactly where float(exp(x)) overflows
      continue;
    }
    sweep.worst_ulp = std::max(sweep.worst_ulp, ulp_distance(got, want));
  }
  return sweep;
}

Sweep sweep_cos(std::uint32_t first, std::uint32_t last, std::uint32_t stride) {
  Sweep sweep;
  for (std::uint64_t bits = first; bits <= last; bits += stride) {
    const float x = bits_float(static_cast<std::uint32_t>(bits));
    const float got = portable_cos(x);
    sweep.other_defects += float_bits(portable_cos(-x)) != float_bits(got) || !(std::fabs(got) <= 1.0f);
    sweep.worst_ulp = std::max(sweep.worst_ulp, ulp_distance(got, oracle_cos(x)));
  }
  return sweep;
}

constexpr std::uint32_t kPlusInfinityBits = 0x7f800000u;
constexpr std::uint32_t kMinusZeroBits = 0x80000000u;
constexpr std::uint32_t kMinusInfinityBits = 0xff800000u;

TEST(PortableExp, WithinTwoUlpOverEveryFiniteInput) {
  // Positive floats (+0 up to the largest finite) and negative ones (-0 down to the most negative finite).
  for (const Sweep& sweep :
       {sweep_exp(0, kPlusInfinityBits - 1, 257), sweep_exp(kMinusZeroBits, kMinusInfinityBits - 1, 257)}) {
    EXPECT_LE(sweep.worst_ulp, 2);
    EXPECT_EQ(sweep.other_defects, 0);
  }
}

TEST(PortableExp, EveryFloatNearOverflowAndInTheSubnormalRange) {
  // [88, 89]: the last finite results and the first +inf. [-104, -87]: results below 2^-126 (subnormal,
  // one rounding) down to 0.
  for (const Sweep& sweep : {sweep_exp(float_bits(88.0f), float_bits(89.0f), 1),
                             sweep_exp(float_bits(-87.0f), float_bits(-104.0f), 1)}) {
    EXPECT_LE(sweep.worst_ulp, 2);
    EXPECT_EQ(sweep.other_defects, 0);
  }
  EXPECT_TRUE(std::isinf(portable_exp(88.72284f)));             // above ln(FLT_MAX) = 88.7228391...
  EXPECT_EQ(float_bits(portable_exp(88.72283f)), 0x7f7fff84u);  // the float below: finite, correctly rounded
}

TEST(PortableExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(portable_exp(0.0f), 1.0f);
  EXPECT_EQ(portable_exp(-0.0f), 1.0f);
  EXPECT_EQ(portable_exp(inf), inf);
  EXPECT_EQ(float_bits(portable_exp(-inf)), 0u);
  EXPECT_EQ(float_bits(portable_exp(-104.5f)), 0u);
  EXPECT_EQ(portable_exp(89.5f), inf);
  EXPECT_EQ(portable_exp(std::numeric_limits<float>::max()), inf);
  EXPECT_EQ(float_bits(portable_exp(std::numeric_limits<float>::lowest())), 0u);
  for (std::uint32_t nan_bits : {0x7fc00000u, 0xffc00001u, 0x7fa00000u}) {
    EXPECT_EQ(float_bits(portable_exp(bits_float(nan_bits))), nan_bits);  // the input itself
  }
}

TEST(PortableExp, GoldenPointsAreCorrectlyRounded) {
  struct Golden {
    float x;
    std::uint32_t bits;  // float(exp(x)) rounded to nearest from a 200-bit value
  };
  const Golden golden[] = {
      {1.0f, 0x402df854u},    {-1.0f, 0x3ebc5ab2u},   {0.5f, 0x3fd3094cu},  {-0.5f, 0x3f1b4598u},
      {10.0f, 0x46ac14eeu},   {-10.0f, 0x383e6bceu},  {88.0f, 0x7ef882b7u}, {-87.0f, 0x00b33687u},
      {-100.0f, 0x0000001bu}, {-103.0f, 0x00000001u},
  };
  for (const Golden& g : golden) EXPECT_EQ(float_bits(portable_exp(g.x)), g.bits) << "exp(" << g.x << ")";
}

TEST(PortableCos, WithinOneUlpOverZeroToPi) {
  constexpr float kPi = 0x1.921fb6p1f;  // the fp32 π of docs/routing.md 3.4 (slightly above π)
  // Every 61st float of [0, π], every 257th of [π, 64], and every float of [2^-12, 2^-11] (cos(x) there is
  // 1 − x²/2 with x²/2 around the rounding step of 1).
  for (const Sweep& sweep : {sweep_cos(0, float_bits(kPi), 61),
                             sweep_cos(float_bits(kPi), float_bits(kPortableCosMaxArgument), 257),
                             sweep_cos(float_bits(0x1p-12f), float_bits(0x1p-11f), 1)}) {
    EXPECT_LE(sweep.worst_ulp, 1);
    EXPECT_EQ(sweep.other_defects, 0);
  }
}

TEST(PortableCos, SpecialValuesAndDomain) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(portable_cos(0.0f), 1.0f);
  EXPECT_EQ(portable_cos(-0.0f), 1.0f);
  EXPECT_FALSE(std::isnan(portable_cos(kPortableCosMaxArgument)));
  EXPECT_EQ(float_bits(portable_cos(std::nextafter(kPortableCosMaxArgument, inf))), 0x7fc00000u);
  EXPECT_EQ(float_bits(portable_cos(inf)), 0x7fc00000u);
  EXPECT_EQ(float_bits(portable_cos(-inf)), 0x7fc00000u);
  EXPECT_EQ(float_bits(portable_cos(bits_float(0xffc00001u))), 0xffc00001u);  // NaN passes bit for bit
}

TEST(PortableCos, GoldenPointsAreCorrectlyRounded) {
  constexpr float kPi = 0x1.921fb6p1f;
  struct Golden {
    float x;
    std::uint32_t bits;  // float(cos(x)) rounded to nearest from a 200-bit value
  };
  const Golden golden[] = {
      {0.5f, 0x3f60a940u},       {1.0f, 0x3f0a5140u},        {2.0f, 0xbed51133u},
      {3.0f, 0xbf7d7026u},       {kPi, 0xbf800000u},         {kPi * 0.5f, 0xb33bbd2eu},
      {kPi / 3.0f, 0x3effffffu}, {kPi * 0.25f, 0x3f3504f3u}, {60.0f, 0xbf73d156u},
  };
  for (const Golden& g : golden) EXPECT_EQ(float_bits(portable_cos(g.x)), g.bits) << "cos(" << g.x << ")";
}

}  // namespace
}  // namespace eps
