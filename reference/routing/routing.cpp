#include "reference/routing/routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

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

namespace {

void append_part(const Routing& part, Routing& whole) {
  const std::int64_t slot_offset = whole.slot_begin.back();
  for (std::int64_t t = 1; t <= part.num_tokens; ++t)
    whole.slot_begin.push_back(slot_offset + part.slot_begin[t]);
  whole.slot_expert.insert(whole.slot_expert.end(), part.slot_expert.begin(), part.slot_expert.end());
  whole.slot_gate.insert(whole.slot_gate.end(), part.slot_gate.begin(), part.slot_gate.end());
  whole.k_per_sample.insert(whole.k_per_sample.end(), part.k_per_sample.begin(), part.k_per_sample.end());
  whole.capacity_per_sample.insert(whole.capacity_per_sample.end(), part.capacity_per_sample.begin(),
                                   part.capacity_per_sample.end());
  for (std::size_t e = 0; e < part.expert_load.size(); ++e) whole.expert_load[e] += part.expert_load[e];
  whole.num_tokens += part.num_tokens;
  whole.dropped_tokens += part.dropped_tokens;
  whole.dropped_assignments += part.dropped_assignments;
  whole.compute_cost += part.compute_cost;
  whole.static_cost += part.static_cost;
}

}  // namespace

Result<Routing> join_routings(std::span<const Routing> parts) {
  if (parts.empty()) return invalid_argument("parts", "need at least one routing to join");
  Routing whole;
  whole.num_experts = parts.front().num_experts;
  whole.seq_len = parts.front().seq_len;
  whole.slot_begin.push_back(0);
  whole.expert_load.assign(static_cast<std::size_t>(whole.num_experts), 0);
  bool every_capacity = true;
  std::int64_t capacity_sum = 0;
  double weighted_drops = 0.0;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const Routing& part = parts[p];
    if (part.num_experts != whole.num_experts || part.seq_len != whole.seq_len) {
      return invalid_argument(fmt::format("parts[{}]", p), "has E = {}, S = {}; part 0 has E = {}, S = {}",
                              part.num_experts, part.seq_len, whole.num_experts, whole.seq_len);
    }
    if (part.num_tokens == 0) continue;
    append_part(part, whole);
    every_capacity = every_capacity && part.capacity.has_value();
    capacity_sum += part.capacity.value_or(0);
    weighted_drops += part.drop_ratio * static_cast<double>(part.num_tokens);
  }
  if (every_capacity && whole.num_tokens > 0) whole.capacity = capacity_sum;
  whole.drop_ratio = whole.num_tokens > 0 ? weighted_drops / static_cast<double>(whole.num_tokens) : 0.0;
  std::int64_t slots_total = 0;
  if (whole.capacity) {
    slots_total = whole.num_experts * *whole.capacity;
  } else if (!whole.capacity_per_sample.empty()) {
    for (std::int64_t c : whole.capacity_per_sample) slots_total += whole.num_experts * c;
  }
  std::int64_t kept = 0;
  for (std::int64_t load : whole.expert_load) kept += load;
  if (slots_total > 0) {
    whole.padding_waste = static_cast<double>(slots_total - kept) / static_cast<double>(slots_total);
  }
  return whole;
}

Result<Routing> routing_from_topk(std::span<const std::int32_t> topk_idx, std::span<const float> topk_weights,
                                  std::int64_t num_tokens, std::int64_t num_experts, std::int64_t top_k,
                                  std::int64_t seq_len) {
  if (top_k < 1 || num_experts < 1 || num_tokens < 0) {
    return invalid_argument("topk_idx", "needs K >= 1, E >= 1 and T >= 0, got K = {}, E = {}, T = {}", top_k,
                            num_experts, num_tokens);
  }
  const auto slots = static_cast<std::size_t>(num_tokens * top_k);
  if (topk_idx.size() != slots || topk_weights.size() != slots) {
    return invalid_argument("topk_idx", "expected T·K = {}·{} ids and weights, got {} and {}", num_tokens,
                            top_k, topk_idx.size(), topk_weights.size());
  }
  if (seq_len < 1 || num_tokens % seq_len != 0) {
    return invalid_argument("seq_len", "T = {} tokens is not a multiple of seq_len {}", num_tokens, seq_len);
  }
  Routing r;
  r.num_tokens = num_tokens;
  r.num_experts = num_experts;
  r.seq_len = seq_len;
  r.expert_load.assign(static_cast<std::size_t>(num_experts), 0);
  r.slot_begin.push_back(0);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    std::int64_t kept = 0;
    for (std::int64_t k = 0; k < top_k; ++k) {
      const std::size_t at = static_cast<std::size_t>(t * top_k + k);
      const std::int32_t e = topk_idx[at];
      const std::string field = fmt::format("topk_idx[{}][{}]", t, k);
      if (e < -1 || e >= num_experts) return out_of_range<std::int64_t>(field, -1, num_experts - 1, e);
      if (e >= 0 &&
          std::find(topk_idx.begin() + t * top_k, topk_idx.begin() + at, e) != topk_idx.begin() + at) {
        return invalid_argument(field, "expert {} appears twice in token {}", e, t);
      }
      if (!std::isfinite(topk_weights[at])) {
        return invalid_argument(fmt::format("topk_weights[{}][{}]", t, k), "must be finite, got {}",
                                topk_weights[at]);
      }
      r.slot_expert.push_back(e);
      r.slot_gate.push_back(e >= 0 ? topk_weights[at] : 0.0f);
      if (e >= 0) {
        ++r.expert_load[static_cast<std::size_t>(e)];
        ++kept;
      }
    }
    r.slot_begin.push_back(r.slot_begin.back() + top_k);
    r.dropped_assignments += top_k - kept;
    r.dropped_tokens += kept == 0 ? 1 : 0;
  }
  r.k_per_sample.assign(static_cast<std::size_t>(num_tokens / seq_len), top_k);
  r.drop_ratio =
      num_tokens > 0 ? static_cast<double>(r.dropped_assignments) / static_cast<double>(slots) : 0.0;
  r.compute_cost = num_tokens * top_k;
  r.static_cost = num_tokens * top_k;
  return r;
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
