// One expert ready to run with a chosen kernel (docs/layer.md 4.1-4.2), and its weights generated from the
// docs/numerics.md 2.2 value mappings. This is the interface the MoE layer reference uses.
//
// Kernels: `scalar` (swiglu.hpp: docs/numerics.md 1.4 ascending sums, the reference) and `vectorized`
// (tree_kernel.hpp: the fixed 16-lane tree with FMA, batch invariant, on the widest SIMD path of this
// CPU). Both produce bit-identical results for a row whatever batch it is part of; they differ from each
// other only in the rounding of the dot products.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "reference/common/status.hpp"
#include "reference/expert/swiglu.hpp"
#include "reference/expert/tree_kernel.hpp"

namespace eps {

enum class ExpertKernelKind { kScalar, kVectorized };

// "scalar" / "vectorized".
std::string_view expert_kernel_name(ExpertKernelKind kind);
// Parses a kernel name; the error names `field` and the allowed values.
Result<ExpertKernelKind> parse_expert_kernel(std::string_view field, std::string_view name);

// Routed experts, shared experts: docs/numerics.md 2.2 weights use different matrix ids for them.
enum class ExpertRole { kRouted, kShared };

// Weights of routed expert `index` (or shared expert `index`) of `layer`, from
// data::fill_expert_weight: W1, W3 [F, H] with fan_in H and W2 [H, F] with fan_in F, each a payload
// value scaled by a power of two near 1/sqrt(fan_in) (reference/data/values.hpp). Errors: shape out of
// range, layer beyond data::kMaxLayer.
Result<ExpertWeights> generate_expert_weights(std::uint64_t seed, std::uint32_t layer, ExpertRole role,
                                              std::uint32_t index, ExpertShape shape);

// Owns the bf16 weights and, for the vectorized kernel, their prepared fp32 copy. Immutable once
// created; `forward` may run concurrently.
class Expert {
 public:
  static Result<Expert> create(ExpertWeights weights, ExpertKernelKind kind);

  ExpertKernelKind kind() const { return kind_; }
  const ExpertShape& shape() const { return weights_.shape; }
  const ExpertWeights& weights() const { return weights_; }

  // Runs the expert on x [n, H] with this expert's kernel (outputs as in swiglu.hpp).
  Status forward(std::span<const bf16> x, const ExpertOutputs& out) const;

 private:
  Expert(ExpertWeights weights, ExpertKernelKind kind) : weights_(std::move(weights)), kind_(kind) {}

  ExpertWeights weights_;
  ExpertKernelKind kind_;
  std::optional<TreeExpert> tree_;
};

}  // namespace eps
