// Portable fp32 exp and cos (docs/numerics.md 1.5): the only exp and cos the references use, so that the CPU
// reference and the CUDA and HIP kernels produce the same bits. Each is a range reduction and a fixed
// polynomial written with fp32 +, −, × and exact bit manipulation only: no libm, no vendor intrinsic, no
// division, no fused multiply-add.
//
// Bit-identical results need every operation to round once, so every translation unit that calls these
// functions must be compiled without floating-point contraction: the reference libraries and the tests are
// built with -ffp-contract=off (cmake/EpsHelpers.cmake), CUDA with --fmad=false and HIP with
// -ffp-contract=off (cmake/Accelerators.cmake). Subnormal results are produced (gradual underflow), so a
// device build must not flush denormals (no --use_fast_math, -ftz=true or -fgpu-flush-denormals-to-zero).
//
// portable_exp(x): ≤ 2 ulp from float(exp(double(x))) for every fp32 x (a one-off sweep of all 2^32 inputs
//   measured at most 1 ulp; reference/numerics/tests/transcendental_test.cpp checks every 257th float and
//   every float near overflow and in the subnormal range). Domain handling:
//     x > 89                     +inf (exp overflows fp32 from x ≈ 88.7228; between 88.7228 and 89 the final
//                                scaling overflows to +inf as well)
//     x in [-104, 89]            the polynomial path; results below 2^-126 are subnormals (gradual
//                                underflow), rounded once, and 0 below exp(x) ≈ 2^-150
//     x < -104, x = -inf         +0 (exp(-104) ≈ 6.8e-46 is below half the smallest subnormal 2^-149)
//     NaN                        the input itself, bit for bit (no arithmetic touches it)
//   Method: k = round(x·log2(e)), r = x − k·ln2 with ln2 = kLn2Hi + kLn2Lo (Cody–Waite: kLn2Hi has 16
//   significant bits, so k·kLn2Hi and x − k·kLn2Hi are exact for |k| ≤ 150) carried as the pair
//   r_hi + r_lo; exp(r) = 1 + r + r²·P(r) with P of degree 5; the sum 1 + r_hi is split exactly (Fast2Sum)
//   so that the last addition is the only rounding of size ulp; then · 2^k as two exact power-of-two
//   factors, so that only the last multiplication rounds (into the subnormal range or to +inf).
//
// portable_cos(x): ≤ 1 ulp from float(cos(double(x))) for |x| ≤ kPortableCosMaxArgument = 64 (a one-off
//   sweep of every float in [0, 64] measured at most 1 ulp; the test checks every 61st float of [0, π] and
//   every 257th above; the references need |x| ≤ π, docs/routing.md 3.4). Outside the bound:
//     |x| > 64, x = ±inf         the quiet NaN 0x7fc00000 (not accurate there: refused instead)
//     NaN                        the input itself, bit for bit
//   Method: cos is even, so x is replaced by |x| (sign bit cleared). k = round(|x|·2/π) ≤ 41 fits in 6 bits;
//   r = |x| − k·π/2 with π/2 = kPio2Hi + kPio2Mid + kPio2Lo (18, 18 and 24 significant bits: the first two
//   products with k are exact, the first difference is exact, the second is made exact by TwoSum). The
//   closest fp32 to a multiple of π/2 below 64 is 2^-26.3 away (near 3π/2), and the reduction error is about
//   2^-54, so r_hi + r_lo is accurate to ~2^-28 relative. Then quadrant k mod 4 picks ±cos(r) or ±sin(r):
//     sin(r) ≈ r + r³·S(r²),       S of degree 3
//     cos(r) ≈ 1 − r²/2 + r⁴·C(r²), C of degree 3, with the rounding error of 1 − r²/2 recovered exactly
//   and r_lo entering through sin(r_hi + r_lo) ≈ sin r_hi + r_lo·(1 − r_hi²/2), cos ≈ cos r_hi − r_hi·r_lo.
//   |portable_cos(x)| ≤ 1 always.
//
// Polynomial coefficients: Chebyshev fits (near minimax) computed with mpmath at 200-bit precision of
//   P(r) = (e^r − 1 − r)/r² on |r| ≤ (ln 2/2)·(1 + 2^-10),
//   S(z) = (sin √z − √z)/√z³ and C(z) = (cos √z − 1 + z/2)/z² on z ≤ ((π/4)·(1 + 2^-10))²,
// each coefficient then rounded to the nearest fp32 (written below as exact hexadecimal literals). The
// fits' own errors (1.4e-9 for P, 2.8e-11 for S, 2.4e-12 for C) are far below half an ulp of the results.
// Changing any constant or operation here changes reference outputs; docs/numerics.md 1.5 says such a change
// happens once, on purpose.
#pragma once

#include <cstdint>

#include "reference/common/host_device.hpp"
#include "reference/numerics/bf16.hpp"  // float_bits, bits_float

namespace eps {

inline constexpr float kPortableCosMaxArgument = 64.0f;

namespace transcendental_detail {

// An unevaluated sum hi + lo with |lo| ≤ ulp(hi)/2.
struct FloatPair {
  float hi;
  float lo;
};

// Knuth's TwoSum: hi = fl(a + b) and lo the exact rounding error, for any order of magnitudes.
EPS_HD inline FloatPair two_sum(float a, float b) {
  const float hi = a + b;
  const float b_virtual = hi - a;
  const float a_virtual = hi - b_virtual;
  const float lo = (a - a_virtual) + (b - b_virtual);
  return {hi, lo};
}

// The nearest integer to v (ties to even) as a float, for |v| < 2^22: adding 1.5·2^23 leaves no fraction
// bits, so the addition itself rounds; the subtraction is then exact.
EPS_HD inline float round_to_integer(float v) {
  constexpr float kShifter = 0x1.8p23f;
  return (v + kShifter) - kShifter;
}

EPS_HD inline float pow2(int e) {  // 2^e for e in [-126, 127]
  return bits_float(static_cast<std::uint32_t>(e + 127) << 23);
}

EPS_HD inline float quiet_nan() { return bits_float(0x7fc00000u); }
EPS_HD inline float positive_infinity() { return bits_float(0x7f800000u); }
EPS_HD inline float absolute(float x) { return bits_float(float_bits(x) & 0x7fffffffu); }

// r²·P(r), the part of exp(r) beyond 1 + r, with |r| ≤ 0.3470.
EPS_HD inline float exp_tail(float r) {
  constexpr float kP0 = 0x1p-1f;
  constexpr float kP1 = 0x1.555556p-3f;
  constexpr float kP2 = 0x1.5554e8p-5f;
  constexpr float kP3 = 0x1.1110ep-7f;
  constexpr float kP4 = 0x1.6d43acp-10f;
  constexpr float kP5 = 0x1.a1256ap-13f;
  const float p = kP0 + r * (kP1 + r * (kP2 + r * (kP3 + r * (kP4 + r * kP5))));
  return (r * r) * p;
}

// p·2^k for k in [-150, 129], rounded once: 2^k is applied as 2^(k/2)·2^(k − k/2), two normal powers of
// two; the first product is exact (p is near 1), so only the second rounds.
EPS_HD inline float scale_by_pow2(float p, int k) {
  const int k_first = k / 2;
  return (p * pow2(k_first)) * pow2(k - k_first);
}

// sin(hi + lo) for |hi| ≤ π/4·(1 + 2^-10), |lo| ≤ 2^-24·|hi| (hi·(1 − hi²/2) + ... written around hi).
EPS_HD inline float sin_kernel(float hi, float lo) {
  constexpr float kS0 = -0x1.555556p-3f;
  constexpr float kS1 = 0x1.11110ep-7f;
  constexpr float kS2 = -0x1.a013a2p-13f;
  constexpr float kS3 = 0x1.6dbbfap-19f;
  const float z = hi * hi;
  const float cube = z * hi;
  const float tail = cube * (kS0 + z * (kS1 + z * (kS2 + z * kS3)));
  const float lo_term = lo - (0.5f * z) * lo;  // lo·cos(hi) to first order
  return hi + (tail + lo_term);
}

// cos(hi + lo) for the same range. 1 − z/2 is rounded once and its rounding error recovered exactly, so the
// last addition is the only rounding of size ulp.
EPS_HD inline float cos_kernel(float hi, float lo) {
  constexpr float kC0 = 0x1.555556p-5f;
  constexpr float kC1 = -0x1.6c16cp-10f;
  constexpr float kC2 = 0x1.a015cp-16f;
  constexpr float kC3 = -0x1.2522fp-22f;
  const float z = hi * hi;
  const float half_z = 0.5f * z;  // exact
  const float w = 1.0f - half_z;
  const float w_error = (1.0f - w) - half_z;  // exact: w is in [0.69, 1]
  const float tail = (z * z) * (kC0 + z * (kC1 + z * (kC2 + z * kC3)));
  return w + (w_error + (tail - hi * lo));
}

// |x| − k·π/2 as hi + lo, and k, for 0 ≤ x ≤ kPortableCosMaxArgument.
struct ReducedAngle {
  int k;
  FloatPair r;
};

EPS_HD inline ReducedAngle reduce_half_pi(float x) {
  constexpr float kTwoOverPi = 0x1.45f306p-1f;
  constexpr float kPio2Hi = 0x1.921f8p0f;     // 18 significant bits: k·kPio2Hi is exact for k < 64
  constexpr float kPio2Mid = 0x1.aa22p-19f;   // the next 18 bits
  constexpr float kPio2Lo = 0x1.68c234p-39f;  // the rest, rounded to fp32
  const float kf = round_to_integer(x * kTwoOverPi);
  const float a = x - kf * kPio2Hi;                  // exact
  const FloatPair t = two_sum(a, -(kf * kPio2Mid));  // kf·kPio2Mid exact
  const float low = t.lo - kf * kPio2Lo;
  return {static_cast<int>(kf), two_sum(t.hi, low)};
}

}  // namespace transcendental_detail

// exp(x) in fp32 (docs/numerics.md 1.5); domain handling above.
EPS_HD inline float portable_exp(float x) {
  namespace d = transcendental_detail;
  constexpr float kLog2e = 0x1.715476p0f;
  constexpr float kLn2Hi = 0x1.62e4p-1f;     // 16 significant bits: k·kLn2Hi is exact for |k| ≤ 255
  constexpr float kLn2Lo = 0x1.7f7d1cp-20f;  // ln 2 − kLn2Hi rounded to fp32
  constexpr float kOverflowBound = 89.0f;
  constexpr float kUnderflowBound = -104.0f;
  if (x != x) return x;
  if (x > kOverflowBound) return d::positive_infinity();
  if (x < kUnderflowBound) return 0.0f;
  const float kf = d::round_to_integer(x * kLog2e);
  const float a = x - kf * kLn2Hi;  // exact
  const d::FloatPair r = d::two_sum(a, -(kf * kLn2Lo));
  const float one_plus_hi = 1.0f + r.hi;
  const float one_plus_error = (1.0f - one_plus_hi) + r.hi;  // exact (Fast2Sum: |r.hi| < 1)
  const float lo_terms = r.lo + r.hi * r.lo;                 // e^(hi + lo) ≈ e^hi·(1 + lo)
  const float p = one_plus_hi + (one_plus_error + (d::exp_tail(r.hi) + lo_terms));
  return d::scale_by_pow2(p, static_cast<int>(kf));
}

// cos(x) in fp32 for |x| ≤ kPortableCosMaxArgument (docs/numerics.md 1.5); NaN outside, see above.
EPS_HD inline float portable_cos(float x) {
  namespace d = transcendental_detail;
  if (x != x) return x;
  const float magnitude = d::absolute(x);
  if (!(magnitude <= kPortableCosMaxArgument)) return d::quiet_nan();
  const d::ReducedAngle reduced = d::reduce_half_pi(magnitude);
  switch (reduced.k & 3) {
    case 0:
      return d::cos_kernel(reduced.r.hi, reduced.r.lo);
    case 1:
      return -d::sin_kernel(reduced.r.hi, reduced.r.lo);
    case 2:
      return -d::cos_kernel(reduced.r.hi, reduced.r.lo);
    default:
      return d::sin_kernel(reduced.r.hi, reduced.r.lo);
  }
}

}  // namespace eps
