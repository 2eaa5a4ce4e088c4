// SwiGLU expert FFN, scalar reference kernel (docs/layer.md 4.1, docs/numerics.md 1.4).
//
//   a = W1 · x,  b = W3 · x            fp32 dot products, x bf16 [H], W1/W3 bf16 [F, H] row-major
//   h = bf16(silu(a) * b)              silu(a) = a / (1 + exp(-a)) in fp32 (portable_exp,
//   docs/numerics.md 1.5) y = bf16(W2 · h)                   fp32 dot products, W2 bf16 [H, F] row-major
//
// The scalar reference computes every dot product in ascending index order starting from 0.0f with
// one rounding per multiply and per add (no FMA: the library is built with -ffp-contract=off). It is
// batch invariant by construction: each row is computed on its own.
//
// The vectorized kernel (tree_kernel.hpp) shares `ExpertWeights`, `ExpertOutputs` and the gate of silu.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/expert/silu.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps {

// H and F of one expert. Both must be in [1, kMaxExpertDim].
struct ExpertShape {
  int hidden = 0;  // H
  int ffn = 0;     // F
};

inline constexpr int kMaxExpertDim = 1 << 16;

// Owning bf16 weights of one SwiGLU expert, row-major: w1 and w3 are [F, H], w2 is [H, F].
struct ExpertWeights {
  ExpertShape shape;
  std::vector<bf16> w1;
  std::vector<bf16> w3;
  std::vector<bf16> w2;
};

// OK when the shape is in range and every matrix has its shape's size ("expert.w2: expected ... values").
Status validate_expert_weights(const ExpertWeights& weights);

// Where a kernel writes its results for a batch of n rows. `y` is required; the fp32 views are optional
// (empty = not wanted) and expose the values before their bf16 rounding, so that the dot products of
// two kernels can be compared ulp by ulp (docs/layer.md 4.2):
//   y       [n, H] bf16   the expert output
//   y_fp32  [n, H] fp32   W2 · h before rounding to bf16
//   a_fp32  [n, F] fp32   W1 · x
//   b_fp32  [n, F] fp32   W3 · x
//   h       [n, F] bf16   the intermediate bf16(silu(a) * b)
struct ExpertOutputs {
  std::span<bf16> y;
  std::span<float> y_fp32 = {};
  std::span<float> a_fp32 = {};
  std::span<float> b_fp32 = {};
  std::span<bf16> h = {};
};

// OK when x holds a whole number n of rows of H values and every non-empty output has n rows.
// Writes n to *rows.
Status validate_expert_io(const ExpertShape& shape, std::span<const bf16> x, const ExpertOutputs& out,
                          std::size_t* rows);

// Scalar reference: runs the expert on the rows x [n, H] (n may be 0). Every dot product is docs/numerics.md
// 1.4 ascending sum. Errors: invalid weights or mis-sized buffers.
Status swiglu_scalar(const ExpertWeights& weights, std::span<const bf16> x, const ExpertOutputs& out);

}  // namespace eps
