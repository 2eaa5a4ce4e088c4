#include "reference/expert/expert_kernel.hpp"

#include "reference/data/fill.hpp"

namespace eps {

std::string_view expert_kernel_name(ExpertKernelKind kind) {
  return kind == ExpertKernelKind::kScalar ? "scalar" : "vectorized";
}

Result<ExpertKernelKind> parse_expert_kernel(std::string_view field, std::string_view name) {
  if (name == "scalar") return ExpertKernelKind::kScalar;
  if (name == "vectorized") return ExpertKernelKind::kVectorized;
  return invalid_argument(field, "must be one of {{scalar, vectorized}}, got \"{}\"", name);
}

Result<ExpertWeights> generate_expert_weights(std::uint64_t seed, std::uint32_t layer, ExpertRole role,
                                              std::uint32_t index, ExpertShape shape) {
  using data::WeightMatrix;
  ExpertWeights w;
  w.shape = shape;
  if (shape.hidden < 1 || shape.hidden > kMaxExpertDim) {
    return out_of_range("expert.hidden", 1, kMaxExpertDim, shape.hidden);
  }
  if (shape.ffn < 1 || shape.ffn > kMaxExpertDim)
    return out_of_range("expert.ffn", 1, kMaxExpertDim, shape.ffn);
  const auto h = static_cast<std::uint32_t>(shape.hidden);
  const auto f = static_cast<std::uint32_t>(shape.ffn);
  const bool shared = role == ExpertRole::kShared;
  w.w1.resize(static_cast<std::size_t>(f) * h);
  w.w3.resize(static_cast<std::size_t>(f) * h);
  w.w2.resize(static_cast<std::size_t>(h) * f);
  EPS_RETURN_IF_ERROR(data::fill_expert_weight(
      seed, layer, shared ? WeightMatrix::kSharedW1 : WeightMatrix::kW1, index, f, h, w.w1));
  EPS_RETURN_IF_ERROR(data::fill_expert_weight(
      seed, layer, shared ? WeightMatrix::kSharedW3 : WeightMatrix::kW3, index, f, h, w.w3));
  EPS_RETURN_IF_ERROR(data::fill_expert_weight(
      seed, layer, shared ? WeightMatrix::kSharedW2 : WeightMatrix::kW2, index, h, f, w.w2));
  return w;
}

Result<Expert> Expert::create(ExpertWeights weights, ExpertKernelKind kind) {
  EPS_RETURN_IF_ERROR(validate_expert_weights(weights));
  Expert e(std::move(weights), kind);
  if (kind == ExpertKernelKind::kVectorized) {
    EPS_ASSIGN_OR_RETURN(TreeExpert tree, TreeExpert::create(e.weights_));
    e.tree_ = std::move(tree);
  }
  return e;
}

Status Expert::forward(std::span<const bf16> x, const ExpertOutputs& out) const {
  if (tree_) return tree_->forward(x, out);
  return swiglu_scalar(weights_, x, out);
}

}  // namespace eps
