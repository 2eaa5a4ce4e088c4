// OCP fp8 e4m3fn (docs/numerics.md 1.1): 1 sign, 4 exponent (bias 7), 3 mantissa bits; max finite 448 (0x7e),
// no infinities, NaN = S.1111.111. fp32 -> fp8 rounds to nearest even and saturates to +-448 (infinities
// included); NaN maps to the NaN code with the input's sign. fp8 -> fp32 is exact; a NaN code decodes to
// the quiet NaN 0x7fc00000 with the code's sign.
#pragma once

#include <cstdint>

#include "reference/numerics/bf16.hpp"

namespace eps {

inline constexpr float kFp8Max = 448.0f;
inline constexpr std::uint8_t kFp8MaxCode = 0x7e;
inline constexpr std::uint8_t kFp8NanCode = 0x7f;

// fp32_to_fp8_bits, except that every NaN becomes `nan_code`. Branch-free (select_bits only) so that a
// host loop over it vectorizes and a GPU warp never diverges: the candidates are computed unconditionally
// and the magnitude picks one. Magnitudes are below 2^31 and compare as signed integers, which is what
// SSE2/AVX2 compare instructions offer.
EPS_HD inline std::uint8_t fp32_to_fp8_bits_nan_as(float f, std::uint32_t nan_code) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t mag = u & 0x7fffffffu;
  const auto signed_mag = static_cast<std::int32_t>(mag);
  // Normal range: round the 23-bit mantissa to 3 bits (RNE) in the integer domain; a carry rolls into the
  // exponent naturally. Rebiasing 127 -> 7 subtracts 120 from the exponent field, (120 << 3) after >> 20.
  const std::uint32_t rounded = mag + 0x7ffffu + ((mag >> 20) & 1u);
  const std::uint32_t normal = (rounded >> 20) - (120u << 3);
  // Subnormal range (|f| < 2^-6): in [2^14, 2^15) the fp32 ulp is 2^-9, the fp8 subnormal step, so the
  // fp32 adder rounds |f| to a multiple of 2^-9 with RNE and the low bits of the sum count the steps. A
  // result of 8 steps is the smallest normal, code 0x08, which the integer encoding gives for free.
  const std::uint32_t subnormal = float_bits(bits_float(mag) + 16384.0f) - 0x46800000u;
  std::uint32_t code = select_bits(signed_mag < 0x3c800000, subnormal, normal);  // 0x3c800000 = 2^-6
  code = select_bits(signed_mag >= 0x43e00000, kFp8MaxCode, code);  // |f| >= 448, inf included, saturates
  return static_cast<std::uint8_t>(select_bits(signed_mag > 0x7f800000, nan_code, sign | code));
}

EPS_HD inline std::uint8_t fp32_to_fp8_bits(float f) {
  return fp32_to_fp8_bits_nan_as(f, ((float_bits(f) >> 24) & 0x80u) | kFp8NanCode);
}

EPS_HD inline float fp8_bits_to_fp32(std::uint8_t c) {
  const std::uint32_t sign = static_cast<std::uint32_t>(c & 0x80u) << 24;
  const std::uint32_t mag = c & 0x7fu;
  // Normal: exponent and mantissa fields move up to their fp32 positions, bias 7 -> 127.
  const std::uint32_t normal = (mag << 20) + (120u << 23);
  // Subnormal: mantissa * 2^-9, exact in fp32.
  const std::uint32_t subnormal = float_bits(static_cast<float>(mag) * (1.0f / 512.0f));
  std::uint32_t bits = select_bits(mag < 8u, subnormal, normal);
  bits = select_bits(mag == kFp8NanCode, 0x7fc00000u, bits);
  return bits_float(sign | bits);
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
