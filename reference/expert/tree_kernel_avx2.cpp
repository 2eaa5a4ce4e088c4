// AVX2 + FMA body of the tree kernel (compiled with -mavx2 -mfma; called only when the CPU has them).
// The 16 lanes of one dot product are two ymm registers: lanes 0-7 and 8-15, so the first tree level
// (lane l + lane l + 8) is one vector add. 2 rows x 2 weight rows are computed together. Includes no
// standard-library header, so no shared inline code is emitted with these flags.
#include <immintrin.h>

#include "reference/expert/tree_gemm.hpp"

namespace eps::tree_detail {

namespace {

constexpr int kColBlock = 32;  // weight rows per outer block, as in the AVX-512 body

// The tree of tree_kernel.hpp on lanes lo = 0-7, hi = 8-15.
inline float tree(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

inline void block2x2(const float* x, const float* w, int len, float* out, int ldo) {
  __m256 acc[8];  // [2 * (2 * row + col) + half]
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) acc[q] = _mm256_setzero_ps();
  for (int k = 0; k < len; k += 16) {
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const int at = k + 8 * half;
      const __m256 x0 = _mm256_load_ps(x + at);
      const __m256 x1 = _mm256_load_ps(x + len + at);
      const __m256 w0 = _mm256_load_ps(w + at);
      const __m256 w1 = _mm256_load_ps(w + len + at);
      acc[0 + half] = _mm256_fmadd_ps(x0, w0, acc[0 + half]);
      acc[2 + half] = _mm256_fmadd_ps(x0, w1, acc[2 + half]);
      acc[4 + half] = _mm256_fmadd_ps(x1, w0, acc[4 + half]);
      acc[6 + half] = _mm256_fmadd_ps(x1, w1, acc[6 + half]);
    }
  }
  out[0] = tree(acc[0], acc[1]);
  out[1] = tree(acc[2], acc[3]);
  out[ldo] = tree(acc[4], acc[5]);
  out[ldo + 1] = tree(acc[6], acc[7]);
}

}  // namespace

void tree_gemm_avx2(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo) {
  for (int j0 = 0; j0 < cols; j0 += kColBlock) {
    const int j1 = cols < j0 + kColBlock ? cols : j0 + kColBlock;
    for (int i = 0; i < rows; i += 2) {
      for (int j = j0; j < j1; j += 2) {
        block2x2(x + static_cast<long>(i) * len, w + static_cast<long>(j) * len, len,
                 out + static_cast<long>(i) * ldo + j, ldo);
      }
    }
  }
}

}  // namespace eps::tree_detail
