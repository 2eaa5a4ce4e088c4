// docs/numerics.md 1.1 bf16 conversions against oracles written here: decoding from sign/exponent/mantissa
// with ldexp, and round-to-nearest-even by comparing exact distances in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "reference/numerics/bf16.hpp"

namespace eps {
namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint32_t to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The value of a non-NaN bf16 pattern from its fields (1 sign, 8 exponent with bias 127, 7 mantissa).
// The all-ones exponent with mantissa 0 is infinity; it is given the value 2^128 so that the rounding
// oracle below can treat overflow the IEEE way (round as if the exponent were unbounded).
long double bf16_value(std::uint16_t b) {
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  long double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<long double>(mantissa), -126 - 7);
  } else {
    magnitude = std::ldexp(static_cast<long double>(128 + mantissa), exponent - 127 - 7);
  }
  return (b & 0x8000) ? -magnitude : magnitude;
}

// RNE oracle for a finite, non-NaN float: the candidates are the bf16 toward zero (the upper 16 bits)
// and the next one away from zero; the nearer wins, an exact tie goes to the even mantissa.
std::uint16_t oracle_fp32_to_bf16(float f) {
  const std::uint32_t u = to_bits(f);
  if (std::isinf(f)) return static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t toward_zero = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t away = static_cast<std::uint16_t>(toward_zero + 1);
  const long double x = f;  // exact: long double holds every float
  const long double d_low = std::fabs(x - bf16_value(toward_zero));
  const long double d_high = std::fabs(bf16_value(away) - x);
  if (d_low < d_high) return toward_zero;
  if (d_high < d_low) return away;
  return (toward_zero & 1) ? away : toward_zero;
}

bool is_quiet_nan_bf16(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x0040) != 0; }

TEST(Bf16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = bf16_bits_to_fp32(bits);
    const bool nan = (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
      const std::uint16_t back = fp32_to_bf16_bits(f);
      EXPECT_TRUE(is_quiet_nan_bf16(back)) << std::hex << b << " -> " << back;
      EXPECT_EQ(back & 0x8000, bits & 0x8000) << std::hex << b;
      continue;
    }
    const long double expected =
        (bits & 0x7f80) == 0x7f80 ? ((bits & 0x8000) ? -INFINITY : INFINITY) : bf16_value(bits);
    EXPECT_EQ(static_cast<long double>(f), expected) << std::hex << b;
    EXPECT_EQ(std::signbit(f), (bits & 0x8000) != 0) << std::hex << b;
    EXPECT_EQ(fp32_to_bf16_bits(f), bits) << std::hex << b;
  }
}

TEST(Bf16, NamedRoundingCases) {
  struct Case {
    std::uint32_t in;
    std::uint16_t out;
    const char* what;
  };
  const Case cases[] = {
      // 1 + 2^-8 is halfway between 1.0 (0x3f80, even) and 1 + 2^-7 (0x3f81): stays 1.0.
      {0x3f808000u, 0x3f80, "tie, even lsb stays"},
      // 1 + 3*2^-8 is halfway between 0x3f81 (odd) and 0x3f82 (even): rounds up.
      {0x3f818000u, 0x3f82, "tie, odd lsb rounds up"},
      {0x3f808001u, 0x3f81, "just above a tie rounds up"},
      {0x3f817fffu, 0x3f81, "just below a tie rounds down"},
      // 2 - 2^-8 = 0x3fff8000 is halfway between 0x3fff (odd, 1.9921875) and 2.0: the carry moves into
      // the exponent.
      {0x3fff8000u, 0x4000, "carry into the exponent"},
      {0xbfff8000u, 0xc000, "carry into the exponent, negative"},
      // Largest bf16 is 0x7f7f = (2 - 2^-7) * 2^127; halfway to 2^128 is 0x7f7f8000. Its lsb is odd, so
      // the tie goes to the even neighbour, which is infinity.
      {0x7f7f8000u, 0x7f80, "tie above max overflows to inf"},
      {0x7f7f7fffu, 0x7f7f, "just below the overflow tie stays max"},
      {0x7f7fffffu, 0x7f80, "FLT_MAX overflows to inf"},
      {0xff7fffffu, 0xff80, "-FLT_MAX overflows to -inf"},
      {0x7f800000u, 0x7f80, "inf"},
      {0xff800000u, 0xff80, "-inf"},
      // Subnormals: the bf16 subnormal step is 2^-133 = fp32 pattern 0x00010000.
      {0x00008000u, 0x0000, "subnormal tie to zero (even)"},
      {0x00018000u, 0x0002, "subnormal tie, odd lsb rounds up"},
      {0x00008001u, 0x0001, "subnormal just above a tie"},
      {0x00007fffu, 0x0000, "subnormal just below a tie"},
      {0x807fffffu, 0x8080, "largest negative subnormal rounds to -min normal"},
      {0x80000000u, 0x8000, "-0 keeps its sign"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fp32_to_bf16_bits(from_bits(c.in)), c.out) << c.what;
    EXPECT_EQ(oracle_fp32_to_bf16(from_bits(c.in)), c.out) << "oracle disagrees with the table: " << c.what;
  }
}

TEST(Bf16, NanStaysQuietNanWithItsSign) {
  for (std::uint32_t in : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fbfffffu, 0xffffffffu, 0x7f810000u}) {
    const std::uint16_t out = fp32_to_bf16_bits(from_bits(in));
    EXPECT_TRUE(is_quiet_nan_bf16(out)) << std::hex << in << " -> " << out;
    EXPECT_EQ(out >> 15, in >> 31) << std::hex << in;
  }
}

// Every exact tie (low half 0x8000) and its two neighbours, for every upper half, plus a strided sweep
// over all 2^32 patterns.
TEST(Bf16, MatchesRneOracleOnTiesAndSweep) {
  std::vector<std::uint32_t> inputs;
  for (std::uint32_t hi = 0; hi <= 0xffff; ++hi) {
    for (std::uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0x0000u, 0xffffu}) inputs.push_back((hi << 16) | lo);
  }
  for (std::uint64_t u = 12345; u <= 0xffffffffull; u += 4099)
    inputs.push_back(static_cast<std::uint32_t>(u));
  int failures = 0;
  for (std::uint32_t in : inputs) {
    const float f = from_bits(in);
    if (std::isnan(f)) continue;  // covered by NanStaysQuietNanWithItsSign
    const std::uint16_t got = fp32_to_bf16_bits(f);
    const std::uint16_t want = oracle_fp32_to_bf16(f);
    if (got != want && ++failures <= 10)
      ADD_FAILURE() << std::hex << in << ": got " << got << " want " << want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Bf16, StructWrapsTheConversions) {
  EXPECT_EQ(bf16::from_float(1.0f).bits, 0x3f80);
  EXPECT_EQ(bf16::from_bits(0xc040).to_float(), -3.0f);
  EXPECT_EQ(round_to_bf16(from_bits(0x3f818000u)), from_bits(0x3f820000u));
}

}  // namespace
}  // namespace eps
