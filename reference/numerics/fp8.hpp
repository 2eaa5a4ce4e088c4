// OCP fp8 e4m3fn (SPEC 1.1): 1 sign, 4 exponent (bias 7), 3 mantissa bits; max finite 448 (0x7e), no
// infinities, NaN = S.1111.111. fp32 -> fp8 rounds to nearest even and saturates to +-448 (infinities
// included); NaN maps to the NaN code with the input's sign.
#pragma once

#include <cstdint>

#include "reference/numerics/bf16.hpp"

namespace eps {

inline constexpr float kFp8Max = 448.0f;
inline constexpr std::uint8_t kFp8MaxCode = 0x7e;
inline constexpr std::uint8_t kFp8NanCode = 0x7f;

EPS_HD inline std::uint8_t fp32_to_fp8_bits(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | kFp8NanCode;
  if (mag >= 0x43e00000u) return sign | kFp8MaxCode;  // |f| >= 448 (inf included) saturates
  const int exponent = static_cast<int>(mag >> 23) - 127;
  std::uint32_t code;
  if (exponent < -6) {
    // Subnormal range: the value in units of 2^-9 (exact scaling by a power of two), rounded to even.
    // A result of 8 is the smallest normal 0x08, which the integer encoding gives for free.
    const float units = bits_float(mag) * 512.0f;
    code = static_cast<std::uint32_t>(units);
    const float fraction = units - static_cast<float>(code);
    if (fraction > 0.5f || (fraction == 0.5f && (code & 1u))) ++code;
  } else {
    // Normal: round the 23-bit mantissa to 3 bits (RNE); a carry rolls into the exponent naturally.
    const std::uint32_t rounded = mag + 0x7ffffu + ((mag >> 20) & 1u);
    const std::uint32_t biased = (rounded >> 23) - 127 + 7;
    code = (biased << 3) | ((rounded >> 20) & 7u);
    if (code > kFp8MaxCode) code = kFp8MaxCode;
  }
  return sign | static_cast<std::uint8_t>(code);
}

EPS_HD inline float fp8_bits_to_fp32(std::uint8_t c) {
  const std::uint32_t sign = static_cast<std::uint32_t>(c & 0x80u) << 24;
  const std::uint32_t exponent = (c >> 3) & 0xfu;
  const std::uint32_t mantissa = c & 7u;
  if (exponent == 0xf && mantissa == 7) return bits_float(sign | 0x7fc00000u);
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent - 7 + 127) << 23) | (mantissa << 20));
}

struct fp8e4m3 {
  std::uint8_t bits = 0;

  EPS_HD static fp8e4m3 from_bits(std::uint8_t b) {
    fp8e4m3 v;
    v.bits = b;
    return v;
  }
  EPS_HD static fp8e4m3 from_float(float f) { return from_bits(fp32_to_fp8_bits(f)); }
  EPS_HD float to_float() const { return fp8_bits_to_fp32(bits); }
  EPS_HD friend bool operator==(fp8e4m3 a, fp8e4m3 b) { return a.bits == b.bits; }
};

}  // namespace eps
