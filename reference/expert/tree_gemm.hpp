// Internal to eps_ref_expert: the per-ISA bodies of the tree kernel (tree_kernel.hpp defines the tree).
//
//   out[i * ldo + j] = tree_dot(x + i * len, w + j * len, len)   for i < rows, j < cols
//
// Preconditions (the caller, TreeExpert, guarantees them): rows and cols are multiples of 4, len is a
// multiple of 16, x and w are 64-byte aligned with row stride len. Only plain declarations live here:
// the AVX translation units are compiled with -m flags and must not emit shared inline code.
#pragma once

namespace eps::tree_detail {

void tree_gemm_portable(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo);
void tree_gemm_avx2(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo);
void tree_gemm_avx512(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo);

}  // namespace eps::tree_detail
