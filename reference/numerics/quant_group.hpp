// FP8 per-token quantization of one group of 128 channels (docs/numerics.md 1.2, DeepEP convention): the
// kernel body shared by the host reference (quant.hpp) and the CUDA/HIP kernels (impls/device), so the CPU
// tests cover what the devices run.
//
// For a group x[0..127] of bf16 values:
//   amax  = max(max_i |x_i|, 1e-4f)                              (fp32; NaN inputs are ignored)
//   kAmax:       scale = amax / 448,  q_i = fp8(x_i * (448 / amax))   (each operation one fp32 rounding)
//   kRoundScale: scale = 2^ceil(log2(amax / 448)) with amax / 448 rounded to fp32 first and the ceil taken
//                exactly from its bits; q_i = fp8(x_i / scale)
//   dequantization: x'_i = fp32(q_i) * scale
// fp8() is fp32_to_fp8_bits (RNE, saturating to +-448). Every NaN the quantizer or the dequantizer
// produces is canonical (code 0x7f, fp32 0x7fc00000): the sign of a NaN born in an fp32 product differs
// between x86 and GPUs, and the device results must be bit-identical to the host's.
//
// Consequences worth knowing: an infinite input makes amax and scale infinite, so the group's finite
// values quantize to +-0 and the infinities to NaN; an all-zero group gets the floor scale 1e-4 / 448.
#pragma once

#include <cstdint>
#include <cstring>

#include "reference/common/host_device.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/fp8.hpp"

namespace eps {

inline constexpr int kFp8GroupSize = 128;
inline constexpr float kFp8AmaxFloor = 1e-4f;
inline constexpr std::uint32_t kCanonicalNanBits = 0x7fc00000u;

enum class Fp8ScaleMode : std::uint8_t {
  kAmax,        // scale = amax / 448
  kRoundScale,  // scale = the smallest power of two >= amax / 448 (DeepEP round_scale)
};

// The scale stored with a group and the multiplier its values are quantized with.
struct Fp8GroupScale {
  float scale = 1.0f;
  float multiplier = 1.0f;
};

// |x| of a bf16 as magnitude bits, NaN mapped to 0. For non-negative values the integer order of the
// bit patterns is the numeric order, so an integer max of these is the fp32 max of |x| that ignores NaN.
// Signed 16-bit so that the max reduction vectorizes with SSE2's signed compares.
EPS_HD inline std::int16_t bf16_abs_bits_for_amax(std::uint16_t bits) {
  const auto magnitude = static_cast<std::int16_t>(bits & 0x7fffu);
  return magnitude > 0x7f80 ? std::int16_t{0} : magnitude;
}

// amax of a group from the largest bf16_abs_bits_for_amax of its values.
EPS_HD inline float fp8_group_amax(std::int16_t max_abs_bits) {
  const float amax = bf16_bits_to_fp32(static_cast<std::uint16_t>(max_abs_bits));
  return amax > kFp8AmaxFloor ? amax : kFp8AmaxFloor;
}

// 2^ceil(log2(r)) for a normal positive r or +inf, from the bits: the exponent, plus one unless r is
// already a power of two. No libm log2, whose rounding could move the ceil.
EPS_HD inline float pow2_ceil(float r) {
  const std::uint32_t u = float_bits(r);
  const std::uint32_t round_up = (u & 0x7fffffu) != 0u ? 1u : 0u;
  return bits_float(((u >> 23) + round_up) << 23);
}

EPS_HD inline Fp8GroupScale fp8_group_scale(float amax, Fp8ScaleMode mode) {
  Fp8GroupScale s;
  if (mode == Fp8ScaleMode::kRoundScale) {
    s.scale = pow2_ceil(amax / kFp8Max);
    // 1 / 2^k is exact here (scale lies in [2^-22, 2^120] or is inf), and x * 2^-k rounds the same real
    // number as x / 2^k, so the multiply equals docs/numerics.md 1.2's division bit for bit.
    s.multiplier = 1.0f / s.scale;
  } else {
    s.scale = amax / kFp8Max;
    s.multiplier = kFp8Max / amax;
  }
  return s;
}

EPS_HD inline std::uint8_t fp8_quantize_value(float x, float multiplier) {
  return fp32_to_fp8_bits_nan_as(x * multiplier, kFp8NanCode);
}

EPS_HD inline float fp8_dequantize_value(std::uint8_t code, float scale) {
  const std::uint32_t y = float_bits(fp8_bits_to_fp32(code) * scale);
  return bits_float(select_bits((y & 0x7fffffffu) > 0x7f800000u, kCanonicalNanBits, y));
}

// Quantizes x[0..127] into q[0..127] and returns the group's scale.
EPS_HD inline float fp8_quantize_group(const bf16* x, std::uint8_t* q, Fp8ScaleMode mode) {
  std::int16_t max_abs_bits = 0;
  for (int i = 0; i < kFp8GroupSize; ++i) {
    const std::int16_t a = bf16_abs_bits_for_amax(x[i].bits);
    max_abs_bits = a > max_abs_bits ? a : max_abs_bits;
  }
  const Fp8GroupScale s = fp8_group_scale(fp8_group_amax(max_abs_bits), mode);
  // Bytes stored through q may alias x as far as the compiler knows; a local buffer lets the loop
  // vectorize without a run-time overlap check.
  std::uint8_t codes[kFp8GroupSize];
  for (int i = 0; i < kFp8GroupSize; ++i) codes[i] = fp8_quantize_value(x[i].to_float(), s.multiplier);
  std::memcpy(q, codes, sizeof codes);
  return s.scale;
}

// Dequantizes q[0..127] with the group's scale into out[0..127].
EPS_HD inline void fp8_dequantize_group(const std::uint8_t* q, float scale, float* out) {
  for (int i = 0; i < kFp8GroupSize; ++i) out[i] = fp8_dequantize_value(q[i], scale);
}

}  // namespace eps
