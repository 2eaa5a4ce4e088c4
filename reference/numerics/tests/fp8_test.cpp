// docs/numerics.md 1.1 fp8 e4m3fn conversions against oracles written here: every code decoded from its
// fields with ldexp, and fp32 -> fp8 as "nearest of the 127 finite magnitudes, ties to the even code,
// saturate".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "reference/numerics/fp8.hpp"

namespace eps {
namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// e4m3fn by its definition: bias 7, subnormals m * 2^-9, S.1111.111 is NaN, no infinities.
double fp8_value(std::uint8_t code) {
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 7;
  if (exponent == 0xf && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 7 - 3);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The 127 finite non-negative magnitudes, indexed by code 0x00..0x7e (ascending with the code).
const std::vector<double>& fp8_magnitudes() {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (int c = 0; c <= 0x7e; ++c) t.push_back(fp8_value(static_cast<std::uint8_t>(c)));
    return t;
  }();
  return table;
}

// Oracle: saturate at 448; otherwise pick the nearer of the two finite magnitudes around |f|, ties to
// the even code; the input's sign is kept (also for zero).
std::uint8_t oracle_fp32_to_fp8(float f) {
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 448.0) return sign | 0x7e;
  const std::vector<double>& table = fp8_magnitudes();
  // First magnitude > a; a < 448 so it exists, and a >= 0 = table[0] so it is not the first.
  const auto high =
      static_cast<std::uint8_t>(std::upper_bound(table.begin(), table.end(), a) - table.begin());
  const auto low = static_cast<std::uint8_t>(high - 1);
  if (table[low] == a) return sign | low;
  const double d_low = a - table[low];
  const double d_high = table[high] - a;
  if (d_low < d_high) return sign | low;
  if (d_high < d_low) return sign | high;
  return sign | ((low & 1) ? high : low);
}

TEST(Fp8, EveryCodeDecodesToItsDefinedValueAndReencodes) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float f = fp8_bits_to_fp32(code);
    const double expected = fp8_value(code);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(f)) << c;
      EXPECT_EQ(fp32_to_fp8_bits(f) & 0x7f, 0x7f) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), expected) << c;
    EXPECT_EQ(std::signbit(f), (c & 0x80) != 0) << c;
    EXPECT_EQ(fp32_to_fp8_bits(f), code) << c;
  }
}

TEST(Fp8, KnownValues) {
  EXPECT_EQ(fp8_bits_to_fp32(0x7e), 448.0f);
  EXPECT_EQ(fp8_bits_to_fp32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_bits_to_fp32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_bits_to_fp32(0x38), 1.0f);                  // exponent 7 = bias
  EXPECT_EQ(fp8_bits_to_fp32(0xc0), -2.0f);
}

TEST(Fp8, NamedRoundingCases) {
  struct Case {
    float in;
    std::uint8_t out;
    const char* what;
  };
  const float step = std::ldexp(1.0f, -9);  // subnormal step
  const Case cases[] = {
      {0.5f * step, 0x00, "half the smallest subnormal: tie to 0 (even)"},
      {std::nextafter(0.5f * step, 1.0f), 0x01, "just above half a step"},
      {1.5f * step, 0x02, "subnormal tie between 1 (odd) and 2 steps"},
      {2.5f * step, 0x02, "subnormal tie between 2 (even) and 3 steps"},
      {7.5f * step, 0x08, "tie between the largest subnormal (odd) and the smallest normal"},
      // [1, 2) has step 1/8: 1 + 1/16 is halfway between 0x38 (even) and 0x39.
      {1.0625f, 0x38, "normal tie, even stays"},
      {1.1875f, 0x3a, "normal tie, odd rounds up"},
      // 1.9375 is halfway between 1.875 (0x3f, odd) and 2.0 (0x40): the carry enters the exponent.
      {1.9375f, 0x40, "carry into the exponent"},
      // In [256, 512) the step is 32: 432 is halfway between 416 (0x7d, odd) and 448 (0x7e).
      {432.0f, 0x7e, "tie between 416 and 448"},
      {std::nextafter(432.0f, 0.0f), 0x7d, "just below the 416/448 tie"},
      // 464 is halfway between 448 and the next step 480 (which e4m3fn spends on NaN): saturates to 448.
      {464.0f, 0x7e, "tie between 448 and the next step"},
      {std::nextafter(464.0f, 1000.0f), 0x7e, "above the 448/480 tie saturates"},
      {449.0f, 0x7e, "above 448 saturates"},
      {1.0e30f, 0x7e, "large saturates"},
      {std::numeric_limits<float>::max(), 0x7e, "FLT_MAX saturates"},
      {std::numeric_limits<float>::infinity(), 0x7e, "inf saturates"},
      {-std::numeric_limits<float>::infinity(), 0xfe, "-inf saturates"},
      {-464.0f, 0xfe, "negative tie saturates"},
      {-1.1875f, 0xba, "negative normal tie"},
      {-1.5f * step, 0x82, "negative subnormal tie"},
      {-0.0f, 0x80, "-0 keeps its sign"},
      {std::numeric_limits<float>::denorm_min(), 0x00, "fp32 subnormal underflows to 0"},
      {-std::numeric_limits<float>::denorm_min(), 0x80, "negative fp32 subnormal underflows to -0"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fp32_to_fp8_bits(c.in), c.out) << c.what;
    EXPECT_EQ(oracle_fp32_to_fp8(c.in), c.out) << "oracle disagrees with the table: " << c.what;
  }
}

TEST(Fp8, NanMapsToNanCodeWithSign) {
  EXPECT_EQ(fp32_to_fp8_bits(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(fp32_to_fp8_bits(from_bits(0x7f800001u)), 0x7f);  // signalling
  EXPECT_EQ(fp32_to_fp8_bits(from_bits(0xffc00000u)), 0xff);
  EXPECT_EQ(fp32_to_fp8_bits(from_bits(0xffffffffu)), 0xff);
  std::uint32_t nan_bits;
  const float nan = fp8_bits_to_fp32(0x7f);
  std::memcpy(&nan_bits, &nan, sizeof nan_bits);
  EXPECT_EQ(nan_bits, 0x7fc00000u);
}

// Every tie point between neighbouring fp8 values and its fp32 neighbours, every fp8 value and its
// neighbours, and a strided sweep over all 2^32 fp32 patterns, all against the oracle.
TEST(Fp8, MatchesOracleOnTiesAndSweep) {
  std::vector<float> inputs;
  for (int c = 0; c < 0x7e; ++c) {
    const float a = fp8_bits_to_fp32(static_cast<std::uint8_t>(c));
    const float b = fp8_bits_to_fp32(static_cast<std::uint8_t>(c + 1));
    const float mid = 0.5f * (a + b);  // exact: a and b have 4 significant bits
    for (float v :
         {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f), std::nextafter(a, 1000.0f)}) {
      inputs.push_back(v);
      inputs.push_back(-v);
    }
  }
  for (std::uint64_t u = 777; u <= 0xffffffffull; u += 997)
    inputs.push_back(from_bits(static_cast<std::uint32_t>(u)));
  int failures = 0;
  for (float f : inputs) {
    const std::uint8_t got = fp32_to_fp8_bits(f);
    const std::uint8_t want = oracle_fp32_to_fp8(f);
    if (got != want && ++failures <= 10) ADD_FAILURE() << f << ": got " << int{got} << " want " << int{want};
  }
  EXPECT_EQ(failures, 0);
}

TEST(Fp8, StructWrapsTheConversions) {
  EXPECT_EQ(fp8e4m3::from_float(448.0f).bits, kFp8MaxCode);
  EXPECT_EQ(fp8e4m3::from_bits(0x38).to_float(), 1.0f);
  EXPECT_EQ(kFp8Max, fp8_bits_to_fp32(kFp8MaxCode));
}

}  // namespace
}  // namespace eps
