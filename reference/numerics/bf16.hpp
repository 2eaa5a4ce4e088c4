// bfloat16 (docs/numerics.md 1.1): fp32 -> bf16 rounds to nearest even on the upper 16 bits; NaN stays a
// quiet NaN (sign and payload top bits kept, quiet bit forced); bf16 -> fp32 is exact.
#pragma once

#include <cstdint>
#include <cstring>

#include "reference/common/host_device.hpp"

namespace eps {

EPS_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

EPS_HD inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// `condition ? if_true : if_false` on bit patterns as a mask blend. GCC's -O2 vectorizer (very-cheap cost
// model) does not if-convert ?: in loops but vectorizes this; on GPUs it is one select either way.
EPS_HD inline std::uint32_t select_bits(bool condition, std::uint32_t if_true, std::uint32_t if_false) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

EPS_HD inline std::uint16_t fp32_to_bf16_bits(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // RNE; a carry may reach inf
  const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const auto magnitude = static_cast<std::int32_t>(u & 0x7fffffffu);  // signed: SSE2 compares are signed
  return static_cast<std::uint16_t>(select_bits(magnitude > 0x7f800000, quiet_nan, rounded));
}

EPS_HD inline float bf16_bits_to_fp32(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

// A bf16 value held as its bit pattern. Conversions are explicit so every rounding is visible.
struct bf16 {
  std::uint16_t bits = 0;

  EPS_HD static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  EPS_HD static bf16 from_float(float f) { return from_bits(fp32_to_bf16_bits(f)); }
  EPS_HD float to_float() const { return bf16_bits_to_fp32(bits); }
  EPS_HD friend bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};

// Round an fp32 value to bf16 precision and back (fp32(bf16(x))).
EPS_HD inline float round_to_bf16(float f) { return bf16::from_float(f).to_float(); }

}  // namespace eps
