// AVX-512F + FMA body of the tree kernel (compiled with -mavx512f -mfma; called only when the CPU has
// them). Includes no standard-library header, so no shared inline code is emitted with these flags.
// One zmm register holds the 16 lanes of one dot product; 4 rows x 4 weight rows are computed
// together so each load feeds 4 FMAs, then the 16 trees are evaluated together by a transposing
// shuffle network whose every addition is one step of the tree of tree_kernel.hpp.
// GCC 12's AVX-512 intrinsic headers trip -Wuninitialized on their own _mm512_undefined_ps (GCC PR 105593,
// fixed in GCC 13); the warning points into the header, so it is silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include "reference/expert/tree_gemm.hpp"

namespace eps::tree_detail {

namespace {

// Weight rows per outer block: 32 rows x len floats stay in L2 while every row block of the chunk
// passes over them.
constexpr int kColBlock = 32;

// Tree levels s = 8 and 4 (tree_kernel.hpp) for two accumulators at once: chunks of 4 lanes move so
// that lane l meets lane l + s; the results of `a` land in the low lanes, those of `b` in the high ones.
inline __m512 level8(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
inline __m512 level4(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
// Levels s = 2 and 1, inside each 128-bit chunk.
inline __m512 level2(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
inline __m512 level1(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

// acc[4 * col + row] -> out[row * ldo + col]. After the four levels lane 4k + m holds the sum of
// acc[4m + k], so 128-bit chunk k is row k's four columns in order.
inline void reduce_store(const __m512* acc, float* out, int ldo) {
  __m512 c[8];
  for (int p = 0; p < 8; ++p) c[p] = level8(acc[2 * p], acc[2 * p + 1]);
  __m512 e[4];
  for (int s = 0; s < 4; ++s) e[s] = level4(c[2 * s], c[2 * s + 1]);
  const __m512 p0 = level2(e[0], e[1]);
  const __m512 p1 = level2(e[2], e[3]);
  const __m512 z = level1(p0, p1);
  _mm_storeu_ps(out, _mm512_extractf32x4_ps(z, 0));
  _mm_storeu_ps(out + ldo, _mm512_extractf32x4_ps(z, 1));
  _mm_storeu_ps(out + 2 * ldo, _mm512_extractf32x4_ps(z, 2));
  _mm_storeu_ps(out + 3 * ldo, _mm512_extractf32x4_ps(z, 3));
}

inline void block4x4(const float* x, const float* w, int len, float* out, int ldo) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q) acc[q] = _mm512_setzero_ps();
  for (int k = 0; k < len; k += 16) {
    __m512 wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) wv[c] = _mm512_load_ps(w + c * len + k);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 xv = _mm512_load_ps(x + r * len + k);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[4 * c + r] = _mm512_fmadd_ps(xv, wv[c], acc[4 * c + r]);
    }
  }
  reduce_store(acc, out, ldo);
}

}  // namespace

void tree_gemm_avx512(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo) {
  for (int j0 = 0; j0 < cols; j0 += kColBlock) {
    const int j1 = cols < j0 + kColBlock ? cols : j0 + kColBlock;
    for (int i = 0; i < rows; i += 4) {
      for (int j = j0; j < j1; j += 4) {
        block4x4(x + static_cast<long>(i) * len, w + static_cast<long>(j) * len, len,
                 out + static_cast<long>(i) * ldo + j, ldo);
      }
    }
  }
}

}  // namespace eps::tree_detail
