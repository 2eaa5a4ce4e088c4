#include "reference/routing/routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace eps::routing {
namespace {

// One vectorizable pass decides whether any value is NaN or +inf; only then look for the first one.
Status check_logit_values(const RoutingInput& input) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Fixed-size blocks so that -O2 vectorizes the scan.
  constexpr std::size_t kBlock = 16;
  const float* values = input.logits.data();
  const std::size_t n = input.logits.size();
  int bad = 0;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t j = 0; j < kBlock; ++j) bad |= !(values[i + j] < kInf);
  }
  for (; i < n; ++i) bad |= !(values[i] < kInf);
  if (bad == 0) return Status();
  for (std::size_t i = 0; i < input.logits.size(); ++i) {
    const float v = input.logits[i];
    if (v < kInf) continue;
    const std::string field = fmt::format("logits[{}][{}]", i / input.num_experts, i % input.num_experts);
    if (std::isnan(v)) return invalid_argument(field, "NaN is not allowed (docs/numerics.md 1.3)");
    return invalid_argument(field, "+inf is not allowed (only -inf, docs/numerics.md 1.3)");
  }
  return Status();
}

}  // namespace

Status validate_routing_input(const RoutingInput& input) {
  if (input.num_tokens < 1)
    return invalid_argument("logits", "need at least one token (T >= 1), got T = {}", input.num_tokens);
  if (input.num_experts < 1) {
    return invalid_argument("logits", "need at least one expert (E >= 1), got E = {}", input.num_experts);
  }
  const auto expected = static_cast<std::size_t>(input.num_tokens * input.num_experts);
  if (input.logits.size() != expected) {
    return invalid_argument("logits", "expected T·E = {}·{} = {} values, got {}", input.num_tokens,
                            input.num_experts, expected, input.logits.size());
  }
  if (input.seq_len < 1 || input.seq_len > input.num_tokens) {
    return out_of_range("seq_len", std::int64_t{1}, input.num_tokens, input.seq_len);
  }
  if (input.num_tokens % input.seq_len != 0) {
    return invalid_argument("seq_len", "T = {} tokens is not a multiple of seq_len {}", input.num_tokens,
                            input.seq_len);
  }
  if (!input.mask_ratio.empty()) {
    if (static_cast<std::int64_t>(input.mask_ratio.size()) != input.num_samples()) {
      return invalid_argument("mask_ratio", "expected B = {} values (one per sample), got {}",
                              input.num_samples(), input.mask_ratio.size());
    }
    for (std::size_t b = 0; b < input.mask_ratio.size(); ++b) {
      const float r = input.mask_ratio[b];
      if (!(r >= 0.0f && r <= 1.0f)) return out_of_range(fmt::format("mask_ratio[{}]", b), 0.0f, 1.0f, r);
    }
  }
  return check_logit_values(input);
}

Result<FixedTopk> to_fixed_topk(const Routing& routing, std::optional<std::int64_t> width) {
  std::int64_t max_slots = 1;
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) max_slots = std::max(max_slots, routing.num_slots(t));
  FixedTopk fixed;
  fixed.num_tokens = routing.num_tokens;
  fixed.width = width.value_or(max_slots);
  if (fixed.width < 1) return invalid_argument("width", "must be >= 1, got {}", fixed.width);
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
    if (routing.num_slots(t) > fixed.width) {
      return invalid_argument("width", "token {} has {} slots, more than width {}", t, routing.num_slots(t),
                              fixed.width);
    }
  }
  fixed.topk_idx.assign(static_cast<std::size_t>(fixed.num_tokens * fixed.width), -1);
  fixed.topk_weights.assign(fixed.topk_idx.size(), 0.0f);
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
    const auto experts = routing.experts(t);
    const auto gates = routing.gates(t);
    std::copy(experts.begin(), experts.end(), fixed.topk_idx.begin() + t * fixed.width);
    std::copy(gates.begin(), gates.end(), fixed.topk_weights.begin() + t * fixed.width);
  }
  return fixed;
}

}  // namespace eps::routing
