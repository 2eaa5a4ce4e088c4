// docs/numerics.md 1.2 FP8 per-token quantization: hand-computed rows (arithmetic in the comments), the 1e-4
// amax floor, round_scale powers of two, NaN/inf behaviour and the shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference/numerics/quant.hpp"

namespace eps {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// A [tokens, hidden] batch of zeros with the given leading values of row 0.
std::vector<bf16> batch(int tokens, int hidden, std::initializer_list<float> row0 = {}) {
  std::vector<bf16> x(static_cast<std::size_t>(tokens) * hidden, bf16::from_float(0.0f));
  std::size_t i = 0;
  for (float v : row0) x[i++] = bf16::from_float(v);
  return x;
}

Fp8Batch quantize(const std::vector<bf16>& x, int tokens, int hidden, Fp8ScaleMode mode) {
  Result<Fp8Batch> r = quantize_fp8_per_token(x, tokens, hidden, mode);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : Fp8Batch{};
}

TEST(Fp8Quant, HandRowWithExactScale) {
  const float s7 = std::ldexp(1.0f, -7);
  const std::vector<bf16> x =
      batch(1, 128,
            {3.5f, -1.75f, 0.5f, 1.0f, s7, 3.0f * std::ldexp(1.0f, -10), std::ldexp(1.0f, -16),
             std::ldexp(1.0f, -17), 3.0f * std::ldexp(1.0f, -17)});
  const Fp8Batch q = quantize(x, 1, 128, Fp8ScaleMode::kAmax);
  // amax = 3.5; scale = 3.5 / 448 = 2^-7 exactly; multiplier = 448 / 3.5 = 128 exactly.
  EXPECT_EQ(q.scales.at(0), s7);
  const std::uint8_t expected[] = {
      0x7e,  // 3.5 * 128 = 448 = max code
      0xf6,  // -1.75 * 128 = -224 = -1.75 * 2^7: sign, exponent 7 + 7 = 14, mantissa 6 -> 0x80|0x70|6
      0x68,  // 0.5 * 128 = 64 = 2^6: exponent 13 -> 13 << 3
      0x70,  // 1 * 128 = 2^7: exponent 14
      0x38,  // 2^-7 * 128 = 1: exponent 7
      0x2c,  // 3 * 2^-10 * 128 = 0.375 = 1.5 * 2^-2: exponent 5, mantissa 4 -> 0x28|4
      0x01,  // 2^-16 * 128 = 2^-9: the smallest subnormal
      0x00,  // 2^-17 * 128 = 2^-10: tie between 0 and 2^-9, even is 0
      0x02,  // 3 * 2^-17 * 128 = 1.5 * 2^-9: tie between 1 and 2 steps, even is 2
  };
  for (int i = 0; i < 9; ++i) EXPECT_EQ(q.codes[i], expected[i]) << i;
  for (int i = 9; i < 128; ++i) EXPECT_EQ(q.codes[i], 0x00) << i;

  // Dequantization multiplies by 2^-7: 448 -> 3.5, -224 -> -1.75, ..., 2^-9 -> 2^-16, 2 * 2^-9 -> 2^-15.
  Result<std::vector<float>> d = dequantize_fp8_per_token(q);
  ASSERT_TRUE(d.ok()) << d.status().message();
  const float want[] = {3.5f,
                        -1.75f,
                        0.5f,
                        1.0f,
                        s7,
                        3.0f * std::ldexp(1.0f, -10),
                        std::ldexp(1.0f, -16),
                        0.0f,
                        std::ldexp(1.0f, -15)};
  for (int i = 0; i < 9; ++i) EXPECT_EQ((*d)[i], want[i]) << i;
}

TEST(Fp8Quant, HandRowWithInexactScaleUsesFp32Products) {
  const std::vector<bf16> x = batch(1, 128, {3.0f, 1.0f, -2.0f});
  const Fp8Batch q = quantize(x, 1, 128, Fp8ScaleMode::kAmax);
  // scale = fp32(3 / 448) = fp32((12/7) * 2^-8); 12/7 = 1.101101101...b, the 23 mantissa bits are
  // 10110110110110110110110 and the next bit is 1 with a non-zero tail, so round up: 0x5b6db7; exponent
  // -8 -> 119 = 0x77. Bits 0x77 << 23 | 0x5b6db7 = 0x3bdb6db7.
  EXPECT_EQ(bits_of(q.scales[0]), 0x3bdb6db7u);
  // multiplier = fp32(448 / 3) = fp32((7/6) * 2^7); 7/6 = 1.0010101...b, mantissa 0x155555 (next bit 0,
  // round down) = 149.33331298828125.
  //   3 * 149.33331298828125 = 447.99993896484375 (exact in fp32) -> nearest of 416/448 is 448: 0x7e
  //   1 * 149.33331298828125 -> [128, 256) has step 16: 144 (0x71) is nearer than 160
  //   -2 * 149.33331298828125 = -298.6666259765625 -> [256, 512) has step 32: -288 = 0xf9
  EXPECT_EQ(q.codes[0], 0x7e);
  EXPECT_EQ(q.codes[1], 0x71);
  EXPECT_EQ(q.codes[2], 0xf9);
  // Dequantization: fp8 values have 4 significant bits and the scale 24, so the product is exact in
  // double and one rounding to float is the fp32 product: an independent oracle.
  Result<std::vector<float>> d = dequantize_fp8_per_token(q);
  ASSERT_TRUE(d.ok());
  const double scale = q.scales[0];
  EXPECT_EQ((*d)[0], static_cast<float>(448.0 * scale));
  EXPECT_EQ((*d)[1], static_cast<float>(144.0 * scale));
  EXPECT_EQ((*d)[2], static_cast<float>(-288.0 * scale));
}

TEST(Fp8Quant, UnitMultiplierExposesFp8Ties) {
  // amax = 448 -> scale = 1 and multiplier = 1, so q is plain fp8 rounding.
  const std::vector<bf16> x = batch(1, 128, {448.0f, 17.0f, 19.0f, -9.0f, 0.5625f});
  const Fp8Batch q = quantize(x, 1, 128, Fp8ScaleMode::kAmax);
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(q.codes[0], 0x7e);
  EXPECT_EQ(q.codes[1], 0x58);  // [16, 32) step 2: 17 ties 16 (mantissa 0) / 18 (1) -> 16 = exponent 11
  EXPECT_EQ(q.codes[2], 0x5a);  // 19 ties 18 (mantissa 1) / 20 (2) -> 20 = 1.25 * 16
  EXPECT_EQ(q.codes[3], 0xd1);  // -9 = -1.125 * 8: sign, exponent 10, mantissa 1
  EXPECT_EQ(q.codes[4], 0x31);  // 0.5625 = 1.125 * 0.5: exponent 6, mantissa 1
}

TEST(Fp8Quant, GroupsAndTokensAreLaidOutRowMajorWithTheAmaxFloor) {
  // Two tokens of two groups. Token 0 group 0 holds 3.5 (scale 2^-7); token 0 group 1 is all zero;
  // token 1 group 0 holds 448 (scale 1); token 1 group 1 holds only 2^-20, below the floor.
  std::vector<bf16> x = batch(2, 256);
  x[5] = bf16::from_float(3.5f);
  x[256 + 7] = bf16::from_float(448.0f);
  x[256 + 128 + 3] = bf16::from_float(std::ldexp(1.0f, -20));
  const Fp8Batch q = quantize(x, 2, 256, Fp8ScaleMode::kAmax);
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[0], std::ldexp(1.0f, -7));
  EXPECT_EQ(q.scales[1], 1e-4f / 448.0f);  // docs/numerics.md 1.2 floor: amax = 1e-4 for an all-zero group
  EXPECT_NEAR(q.scales[1], 2.2321428e-7, 1e-13);
  EXPECT_EQ(q.scales[2], 1.0f);
  EXPECT_EQ(q.scales[3], 1e-4f / 448.0f);
  EXPECT_EQ(q.codes[5], 0x7e);
  EXPECT_EQ(q.codes[256 + 7], 0x7e);
  // 2^-20 * fp32(448 / 1e-4f): 1e-4f = 0.0000999999974738, so 448 / 1e-4f = 4480000.11, which fp32 (step
  // 0.5 there) holds as 4480000. 2^-20 * 4480000 = 4.2724609375 -> [4, 8) step 0.5: 4.5 (distance 0.23)
  // is nearer than 4.0 (0.27); 4.5 = 1.125 * 4: exponent 9, mantissa 1 = 0x49.
  EXPECT_EQ(q.codes[256 + 128 + 3], 0x49);
  int nonzero = 0;
  for (std::uint8_t c : q.codes) nonzero += c != 0;
  EXPECT_EQ(nonzero, 3);
}

TEST(Fp8Quant, RoundScaleHandRows) {
  std::vector<bf16> x = batch(3, 128);
  x[0] = bf16::from_float(3.5f);  // row 0: amax 3.5, 3.5 / 448 = 2^-7 is already a power of two
  x[1] = bf16::from_float(-1.75f);
  x[128] = bf16::from_float(3.0f);  // row 1: amax 3; 3 / 448 = 0.0067 lies in (2^-8, 2^-7] -> 2^-7
  x[129] = bf16::from_float(1.0f);
  x[130] = bf16::from_float(-2.0f);
  // row 2: all zero; 1e-4 / 448 = 2.23e-7 lies in (2^-23 = 1.19e-7, 2^-22 = 2.38e-7] -> 2^-22
  const Fp8Batch q = quantize(x, 3, 128, Fp8ScaleMode::kRoundScale);
  EXPECT_EQ(q.scales[0], std::ldexp(1.0f, -7));
  EXPECT_EQ(q.scales[1], std::ldexp(1.0f, -7));
  EXPECT_EQ(q.scales[2], std::ldexp(1.0f, -22));
  EXPECT_EQ(q.codes[0], 0x7e);    // 3.5 / 2^-7 = 448
  EXPECT_EQ(q.codes[1], 0xf6);    // -1.75 / 2^-7 = -224
  EXPECT_EQ(q.codes[128], 0x7c);  // 3 / 2^-7 = 384 = 1.5 * 2^8: exponent 15, mantissa 4
  EXPECT_EQ(q.codes[129], 0x70);  // 1 / 2^-7 = 128
  EXPECT_EQ(q.codes[130], 0xf8);  // -2 / 2^-7 = -256 = -2^8: exponent 15
  for (int i = 256; i < 384; ++i) EXPECT_EQ(q.codes[i], 0x00);
}

// docs/numerics.md 1.2 round_scale: every scale is 2^k with 2^(k-1) < amax / 448 <= 2^k (checked in double
// from the group's values), and dequantized values are within half an fp8 step of the input.
TEST(Fp8Quant, RoundScaleScalesArePowersOfTwoBracketingAmax) {
  constexpr int kTokens = 64, kHidden = 512;
  std::mt19937 rng(7);
  std::vector<bf16> x(kTokens * kHidden);
  for (int t = 0; t < kTokens; ++t) {
    // Spread magnitudes over many binades, row by row.
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int c = 0; c < kHidden; ++c) x[t * kHidden + c] = bf16::from_float(u(rng) * magnitude);
  }
  const Fp8Batch q = quantize(x, kTokens, kHidden, Fp8ScaleMode::kRoundScale);
  for (std::size_t g = 0; g < q.scales.size(); ++g) {
    double amax = 1e-4f;
    for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(double{x[g * 128 + i].to_float()}));
    const double ratio = amax / 448.0;
    int exponent;
    const double mantissa = std::frexp(static_cast<double>(q.scales[g]), &exponent);
    EXPECT_EQ(mantissa, 0.5) << "scale " << q.scales[g] << " of group " << g << " is not a power of two";
    EXPECT_GE(q.scales[g], ratio) << g;
    EXPECT_LT(q.scales[g] / 2.0, ratio) << g;
  }
  Result<std::vector<float>> d = dequantize_fp8_per_token(q);
  ASSERT_TRUE(d.ok());
  for (std::size_t i = 0; i < x.size(); ++i) {
    // |x / scale| <= 448 and the largest fp8 step below 448 is 32, a relative step of at most 1/8.
    const double xi = x[i].to_float();
    const double scale = q.scales[i / 128];
    EXPECT_LE(std::fabs((*d)[i] - xi), std::max(std::fabs(xi) / 16.0, std::ldexp(1.0, -10) * scale)) << i;
  }
}

TEST(Fp8Quant, NanIsIgnoredByAmaxAndBecomesCanonicalNan) {
  std::vector<bf16> x = batch(1, 128);
  x[0] = bf16::from_bits(0x7fc0);  // NaN
  x[1] = bf16::from_bits(0xffc0);  // -NaN
  x[2] = bf16::from_float(2.0f);
  x[3] = bf16::from_float(-1.0f);
  const Fp8Batch q = quantize(x, 1, 128, Fp8ScaleMode::kAmax);
  // amax = 2 (NaN ignored), scale = 2 / 448 = 1/224, multiplier = 224: 2 -> 448, -1 -> -224.
  EXPECT_EQ(q.scales[0], 2.0f / 448.0f);
  EXPECT_EQ(q.codes[0], 0x7f);
  EXPECT_EQ(q.codes[1], 0x7f);  // canonical: the sign of a NaN is not portable between host and GPU
  EXPECT_EQ(q.codes[2], 0x7e);
  EXPECT_EQ(q.codes[3], 0xf6);
  Result<std::vector<float>> d = dequantize_fp8_per_token(q);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(bits_of((*d)[0]), kCanonicalNanBits);
  EXPECT_EQ((*d)[2], 2.0f);
  EXPECT_EQ((*d)[3], -1.0f);
}

TEST(Fp8Quant, InfinityMakesTheScaleInfinite) {
  std::vector<bf16> x = batch(1, 128, {1.0f, -1.0f});
  x[2] = bf16::from_bits(0x7f80);  // +inf
  const Fp8Batch q = quantize(x, 1, 128, Fp8ScaleMode::kAmax);
  // amax = inf, scale = inf / 448 = inf, multiplier = 448 / inf = 0: 1 * 0 = 0, -1 * 0 = -0, inf * 0 = NaN.
  EXPECT_TRUE(std::isinf(q.scales[0]));
  EXPECT_EQ(q.codes[0], 0x00);
  EXPECT_EQ(q.codes[1], 0x80);
  EXPECT_EQ(q.codes[2], 0x7f);
  Result<std::vector<float>> d = dequantize_fp8_per_token(q);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(bits_of((*d)[0]), kCanonicalNanBits);  // 0 * inf = NaN, made canonical
  EXPECT_EQ(bits_of((*d)[2]), kCanonicalNanBits);
}

// The batch functions run ISA-specific clones of the loops (quant.cpp); this test translation unit
// compiles fp8_quantize_group / fp8_dequantize_group for the baseline ISA. Every bf16 pattern (NaN, inf,
// subnormals included), shuffled into 512 groups, must give bit-identical codes, scales and dequantized
// values both ways.
TEST(Fp8Quant, BatchIsBitIdenticalToTheGroupBody) {
  std::vector<bf16> x(65536);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = bf16::from_bits(static_cast<std::uint16_t>(i));
  std::shuffle(x.begin(), x.end(), std::mt19937(11));
  // Small-magnitude rows too, so that the amax floor and subnormal codes are exercised.
  for (std::size_t i = 0; i < 128 * 8; ++i)
    x[i] = bf16::from_bits(static_cast<std::uint16_t>(x[i].bits & 0x83ff));
  constexpr int kTokens = 64, kHidden = 1024;
  for (Fp8ScaleMode mode : {Fp8ScaleMode::kAmax, Fp8ScaleMode::kRoundScale}) {
    const Fp8Batch q = quantize(x, kTokens, kHidden, mode);
    ASSERT_EQ(q.codes.size(), x.size());
    Result<std::vector<float>> d = dequantize_fp8_per_token(q);
    ASSERT_TRUE(d.ok());
    for (std::size_t g = 0; g < x.size() / 128; ++g) {
      std::uint8_t codes[128];
      const float scale = fp8_quantize_group(x.data() + g * 128, codes, mode);
      ASSERT_EQ(bits_of(q.scales[g]), bits_of(scale)) << "group " << g;
      float out[128];
      fp8_dequantize_group(codes, scale, out);
      for (int i = 0; i < 128; ++i) {
        ASSERT_EQ(q.codes[g * 128 + i], codes[i]) << "group " << g << " value " << i;
        ASSERT_EQ(bits_of((*d)[g * 128 + i]), bits_of(out[i])) << "group " << g << " value " << i;
      }
    }
  }
}

TEST(Fp8Quant, GroupPieces) {
  EXPECT_EQ(pow2_ceil(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil(std::nextafter(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(pow2_ceil(0.75f), 1.0f);
  EXPECT_EQ(pow2_ceil(std::ldexp(1.0f, -126)), std::ldexp(1.0f, -126));
  EXPECT_TRUE(std::isinf(pow2_ceil(std::numeric_limits<float>::max())));
  EXPECT_TRUE(std::isinf(pow2_ceil(std::numeric_limits<float>::infinity())));
  EXPECT_EQ(bf16_abs_bits_for_amax(0xc040), 0x4040);  // |-3| = 3
  EXPECT_EQ(bf16_abs_bits_for_amax(0xff80), 0x7f80);  // |-inf| = inf
  EXPECT_EQ(bf16_abs_bits_for_amax(0xffc1), 0x0000);  // NaN ignored
  EXPECT_EQ(fp8_group_amax(0x0000), kFp8AmaxFloor);
  EXPECT_EQ(bits_of(fp8_dequantize_value(0xff, 1.0f)), kCanonicalNanBits);
  EXPECT_EQ(bits_of(fp8_dequantize_value(0x7f, -1.0f)), kCanonicalNanBits);
  EXPECT_EQ(fp8_quantize_value(std::numeric_limits<float>::quiet_NaN(), -1.0f), kFp8NanCode);
}

TEST(Fp8Quant, ShapeErrors) {
  const std::vector<bf16> x(200);
  Result<Fp8Batch> r = quantize_fp8_per_token(x, 2, 100, Fp8ScaleMode::kAmax);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "hidden: must be a multiple of 128 for fp8, got 100");
  EXPECT_EQ(check_fp8_shape(1, 0).message(), "hidden: must be a multiple of 128 for fp8, got 0");
  EXPECT_EQ(check_fp8_shape(-1, 128).message(), "tokens: must be >= 0, got -1");
  EXPECT_TRUE(check_fp8_shape(0, 7168).ok());

  const std::vector<bf16> short_x(255);
  r = quantize_fp8_per_token(short_x, 2, 128, Fp8ScaleMode::kAmax);
  EXPECT_EQ(r.status().message(), "x: must hold tokens * hidden = 256 values, got 255");
  std::vector<std::uint8_t> codes(256);
  std::vector<float> scales(3);
  const std::vector<bf16> full_x(256);
  EXPECT_EQ(quantize_fp8_per_token(full_x, 2, 128, Fp8ScaleMode::kAmax, codes, scales).message(),
            "scales: must hold tokens * hidden / 128 = 2 values, got 3");
  std::vector<float> out(255);
  EXPECT_EQ(dequantize_fp8_per_token(codes, std::vector<float>(2), 2, 128, out).message(),
            "out: must hold tokens * hidden = 256 values, got 255");
  // Zero tokens is a valid, empty batch.
  Result<Fp8Batch> empty = quantize_fp8_per_token({}, 0, 128, Fp8ScaleMode::kAmax);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->codes.empty());
}

}  // namespace
}  // namespace eps
