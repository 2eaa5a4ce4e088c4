#include "reference/routing/token_choice.hpp"

#include <algorithm>
#include <cmath>

#include "reference/numerics/canonical.hpp"
#include "reference/routing/scores.hpp"

namespace eps::routing {
namespace {

// Per-token buffers, allocated once per routing call.
struct TokenScratch {
  std::vector<float> scores;
  std::vector<float> keys;
  std::vector<float> group_keys;
  std::vector<float> candidate_keys;
  std::vector<int> order;
  std::vector<int> kept_groups;
  std::vector<int> pair;
};

void compute_scores(ScoreFunction score, std::span<const float> row, std::span<float> out) {
  if (score == ScoreFunction::kSoftmax) {
    softmax_row(row, out);
    return;
  }
  for (std::size_t e = 0; e < row.size(); ++e) out[e] = sigmoid(row[e]);
}

// DeepSeek-V3 group limit: candidate experts (ascending ids) of the topk_groups canonical-first groups.
void select_in_groups(const TokenChoiceConfig& config, TokenScratch& s, std::span<std::int32_t> experts) {
  const auto num_experts = static_cast<std::int64_t>(s.keys.size());
  const std::int64_t group_size = num_experts / config.groups;
  const std::span<const float> keys(s.keys);
  for (std::int64_t g = 0; g < config.groups; ++g) {
    const auto group = keys.subspan(g * group_size, group_size);
    const std::size_t m = canonical_topk<float>(group, 2, s.pair);
    s.group_keys[g] = m == 1 ? group[s.pair[0]] : group[s.pair[0]] + group[s.pair[1]];
  }
  canonical_topk<float>(s.group_keys, config.topk_groups, s.kept_groups);
  std::sort(s.kept_groups.begin(), s.kept_groups.end());
  s.candidate_keys.clear();
  for (int g : s.kept_groups) {
    const auto group = keys.subspan(g * group_size, group_size);
    s.candidate_keys.insert(s.candidate_keys.end(), group.begin(), group.end());
  }
  canonical_topk<float>(s.candidate_keys, config.k, s.order);
  for (std::int64_t slot = 0; slot < config.k; ++slot) {
    const std::int64_t c = s.order[slot];
    experts[slot] = static_cast<std::int32_t>(s.kept_groups[c / group_size] * group_size + c % group_size);
  }
}

void route_token(const TokenChoiceConfig& config, std::span<const float> row, TokenScratch& s,
                 std::span<std::int32_t> experts, std::span<float> gates) {
  compute_scores(config.score, row, s.scores);
  for (std::size_t e = 0; e < row.size(); ++e) {
    s.keys[e] = config.bias.empty() ? s.scores[e] : s.scores[e] + config.bias[e];
  }
  if (config.groups > 1) {
    select_in_groups(config, s, experts);
  } else {
    canonical_topk<float>(s.keys, config.k, s.order);
    std::copy_n(s.order.begin(), config.k, experts.begin());
  }
  float sum = 0.0f;
  for (std::int64_t slot = 0; slot < config.k; ++slot) sum += s.scores[experts[slot]];
  for (std::int64_t slot = 0; slot < config.k; ++slot) {
    const float p = s.scores[experts[slot]];
    if (!config.renorm) {
      gates[slot] = p * config.scaling;
    } else {
      gates[slot] = sum == 0.0f ? 0.0f : (p / sum) * config.scaling;
    }
  }
}

void drop_slot(Routing& routing, std::int64_t slot) {
  routing.slot_expert[slot] = -1;
  routing.slot_gate[slot] = 0.0f;
}

// docs/routing.md 3.2 `position`: all first choices (ascending token) before any second choice.
void drop_by_position(Routing& routing, std::int64_t k, std::int64_t capacity) {
  std::vector<std::int64_t> load(routing.num_experts, 0);
  for (std::int64_t slot_rank = 0; slot_rank < k; ++slot_rank) {
    for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
      const std::int64_t slot = t * k + slot_rank;
      std::int64_t& expert_load = load[routing.slot_expert[slot]];
      if (expert_load < capacity) {
        ++expert_load;
      } else {
        drop_slot(routing, slot);
      }
    }
  }
}

// docs/routing.md 3.2 `probs`: per expert keep the `capacity` largest final gates, ties to the lower token
// index.
void drop_by_probs(Routing& routing, std::int64_t capacity) {
  std::vector<std::vector<std::int64_t>> slots_of_expert(routing.num_experts);
  for (std::size_t slot = 0; slot < routing.slot_expert.size(); ++slot) {
    slots_of_expert[routing.slot_expert[slot]].push_back(static_cast<std::int64_t>(slot));
  }
  std::vector<float> gates;
  std::vector<int> keep;
  std::vector<bool> kept;
  for (const auto& slots : slots_of_expert) {
    if (static_cast<std::int64_t>(slots.size()) <= capacity) continue;
    // `slots` ascends by token, so the canonical index tie-break is the token tie-break.
    gates.resize(slots.size());
    for (std::size_t i = 0; i < slots.size(); ++i) gates[i] = routing.slot_gate[slots[i]];
    keep.resize(static_cast<std::size_t>(capacity));
    canonical_topk<float>(gates, static_cast<std::size_t>(capacity), keep);
    kept.assign(slots.size(), false);
    for (int i : keep) kept[i] = true;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (!kept[i]) drop_slot(routing, slots[i]);
    }
  }
}

void fill_statistics(Routing& routing, std::int64_t k) {
  routing.expert_load.assign(routing.num_experts, 0);
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
    std::int64_t kept = 0;
    for (std::int32_t e : routing.experts(t)) {
      if (e < 0) continue;
      ++routing.expert_load[e];
      ++kept;
    }
    routing.dropped_assignments += k - kept;
    routing.dropped_tokens += kept == 0 ? 1 : 0;
  }
  const std::int64_t requested = routing.num_tokens * k;
  routing.drop_ratio = static_cast<double>(routing.dropped_assignments) / static_cast<double>(requested);
  if (routing.capacity && *routing.capacity > 0) {
    const double slots = static_cast<double>(routing.num_experts * *routing.capacity);
    const double kept = static_cast<double>(requested - routing.dropped_assignments);
    routing.padding_waste = (slots - kept) / slots;
  }
  routing.compute_cost = requested;
  routing.static_cost = requested;
}

}  // namespace

Status validate_token_choice(const TokenChoiceConfig& config, std::int64_t num_experts,
                             std::string_view prefix) {
  const auto name = [prefix](std::string_view field) { return fmt::format("{}{}", prefix, field); };
  const std::int64_t one = 1;
  if (config.k < 1 || config.k > num_experts) return out_of_range(name("k"), one, num_experts, config.k);
  if (!config.bias.empty()) {
    if (static_cast<std::int64_t>(config.bias.size()) != num_experts) {
      return invalid_argument(name("bias"), "expected E = {} values, got {}", num_experts,
                              config.bias.size());
    }
    for (std::size_t e = 0; e < config.bias.size(); ++e) {
      if (!std::isfinite(config.bias[e])) {
        return invalid_argument(fmt::format("{}[{}]", name("bias"), e), "must be finite, got {}",
                                config.bias[e]);
      }
    }
  }
  if (config.groups < 1 || config.groups > num_experts) {
    return out_of_range(name("groups"), one, num_experts, config.groups);
  }
  if (num_experts % config.groups != 0) {
    return invalid_argument(name("groups"), "must divide E = {}, got {}", num_experts, config.groups);
  }
  if (config.topk_groups < 1 || config.topk_groups > config.groups) {
    return out_of_range(name("topk_groups"), one, config.groups, config.topk_groups);
  }
  const std::int64_t candidates = config.topk_groups * (num_experts / config.groups);
  if (config.k > candidates) {
    return invalid_argument(name("k"), "must be <= topk_groups·E/groups = {} candidate experts, got {}",
                            candidates, config.k);
  }
  if (!std::isfinite(config.scaling)) {
    return invalid_argument(name("scaling"), "must be finite, got {}", config.scaling);
  }
  const double cf = config.capacity_factor;
  if (config.capacity != CapacityFormula::kDropless && !(cf > 0.0 && cf <= 1e6)) {
    return invalid_argument(name("cf"), "must be in (0, 1e6], got {}", cf);
  }
  return Status();
}

std::optional<std::int64_t> token_choice_capacity(CapacityFormula formula, std::int64_t num_tokens,
                                                  std::int64_t k, std::int64_t num_experts, double cf) {
  switch (formula) {
    case CapacityFormula::kDropless:
      return std::nullopt;
    case CapacityFormula::kMegatron: {
      const double per_expert = static_cast<double>(num_tokens * k) / static_cast<double>(num_experts);
      return static_cast<std::int64_t>(std::ceil(per_expert * cf));
    }
    case CapacityFormula::kGshard: {
      const std::int64_t tokens_per_expert = (num_tokens + num_experts - 1) / num_experts;
      return k * static_cast<std::int64_t>(std::floor(cf * static_cast<double>(tokens_per_expert)));
    }
  }
  return std::nullopt;
}

Result<Routing> route_token_choice(const TokenChoiceConfig& config, const RoutingInput& input) {
  EPS_RETURN_IF_ERROR(validate_routing_input(input));
  EPS_RETURN_IF_ERROR(validate_token_choice(config, input.num_experts));
  const std::int64_t k = config.k;
  Routing routing;
  routing.num_tokens = input.num_tokens;
  routing.num_experts = input.num_experts;
  routing.seq_len = input.seq_len;
  routing.slot_begin.resize(input.num_tokens + 1);
  for (std::int64_t t = 0; t <= input.num_tokens; ++t) routing.slot_begin[t] = t * k;
  routing.slot_expert.resize(input.num_tokens * k);
  routing.slot_gate.resize(input.num_tokens * k);

  const auto e = static_cast<std::size_t>(input.num_experts);
  TokenScratch scratch{std::vector<float>(e),
                       std::vector<float>(e),
                       std::vector<float>(config.groups),
                       {},
                       std::vector<int>(k),
                       std::vector<int>(config.topk_groups),
                       std::vector<int>(2)};
  std::span<std::int32_t> experts(routing.slot_expert);
  std::span<float> gates(routing.slot_gate);
  for (std::int64_t t = 0; t < input.num_tokens; ++t) {
    route_token(config, input.row(t), scratch, experts.subspan(t * k, k), gates.subspan(t * k, k));
  }

  routing.k_per_sample.assign(input.num_samples(), k);
  routing.capacity =
      token_choice_capacity(config.capacity, input.num_tokens, k, input.num_experts, config.capacity_factor);
  if (routing.capacity) {
    if (config.drop == DropPriority::kPosition) {
      drop_by_position(routing, k, *routing.capacity);
    } else {
      drop_by_probs(routing, *routing.capacity);
    }
  }
  fill_statistics(routing, k);
  return routing;
}

}  // namespace eps::routing
