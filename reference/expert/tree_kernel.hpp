// Vectorized, batch-invariant SwiGLU expert kernel (docs/layer.md 4.2).
//
// Same formula as the scalar reference (swiglu.hpp, docs/layer.md 4.1); only the dot products use another
// fixed reduction tree. Every dot product d = Σ_i x_i · w_i of length n is, for every build and CPU:
//
//   1. 16 fp32 lanes start at +0.0f. Lane l takes the indices i ≡ l (mod 16) in ascending order:
//        acc[l] = fma(x_i, w_i, acc[l])            (one rounding: std::fma semantics)
//   2. A fixed pairwise tree: for s = 8, 4, 2, 1: acc[l] = acc[l] + acc[l + s] for l < s.
//   3. d = acc[0].
//
// FMA is part of the definition (not a compiler contraction): the AVX2 and AVX-512 paths use the fma
// instructions and the portable path calls std::fma, so all paths give the same bits. For bf16 operands
// the product x_i · w_i has at most 16 significant bits and is exact in fp32 unless it leaves the normal
// fp32 range, so fma(x, w, acc) then equals the separately rounded acc + x·w; the two only differ for
// products below 2^-126 or above FLT_MAX in magnitude.
//
// The tree never depends on the ISA, on the batch size, on the row's position in the batch or on which
// rows share it, so a row's output bits depend only on that row and the weights (batch invariance).
// Against the docs/numerics.md 1.4 ascending sum of the scalar reference the fp32 results differ only by
// rounding (see the tests for the bounds). silu and the bf16 roundings are the shared ones of swiglu.hpp.
//
// Paths: `kPortable` (plain C++, always available), `kAvx2` (AVX2 + FMA) and `kAvx512` (AVX-512F + FMA).
// The AVX paths are compiled into separate translation units with per-file -m flags when the CMake
// option EPSUITE_EXPERT_SIMD is ON (the default) and are chosen at run time only when the CPU reports
// them, so the default build stays portable.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/expert/swiglu.hpp"

namespace eps {

inline constexpr int kTreeLanes = 16;

enum class SimdPath { kPortable, kAvx2, kAvx512 };

std::string_view simd_path_name(SimdPath path);
// True when the path was compiled in and this CPU supports it.
bool simd_path_available(SimdPath path);
// The widest available path.
SimdPath best_simd_path();
// Every available path, narrowest first (always starts with kPortable).
std::vector<SimdPath> available_simd_paths();

// An expert prepared for the tree kernel: fp32 copies of the bf16 weights (exact), rows padded with
// zeros to a multiple of 16 values and the row counts to a multiple of 4. Immutable after `create`;
// copies share the prepared weights; `forward` may run concurrently from several threads.
class TreeExpert {
 public:
  static Result<TreeExpert> create(const ExpertWeights& weights);

  const ExpertShape& shape() const { return shape_; }

  // Runs the expert on the rows x [n, H] (n may be 0) on the widest available path, or on `path`
  // (error when it is not available). Outputs as in swiglu.hpp.
  Status forward(std::span<const bf16> x, const ExpertOutputs& out) const;
  Status forward(std::span<const bf16> x, const ExpertOutputs& out, SimdPath path) const;

 private:
  TreeExpert() = default;
  void forward_chunk(const bf16* x, int rows, const ExpertOutputs& out, std::size_t first_row,
                     SimdPath path) const;

  ExpertShape shape_;
  int hidden_len_ = 0;   // H rounded up to a multiple of 16: the padded row length of W1, W3 and x
  int ffn_len_ = 0;      // F rounded up to a multiple of 16: the padded row length of W2 and h
  int hidden_rows_ = 0;  // H rounded up to a multiple of 4: the padded row count of W2
  int ffn_rows_ = 0;     // F rounded up to a multiple of 4: the padded row count of W1 and W3
  std::shared_ptr<const float> weights_;  // [W1 | W3 | W2], 64-byte aligned
  const float* w1_ = nullptr;
  const float* w3_ = nullptr;
  const float* w2_ = nullptr;
};

}  // namespace eps
