#include "reference/layer/combine.hpp"

#include <algorithm>

namespace eps {

Result<CombineTree> parse_combine_tree(std::string_view field, std::string_view name) {
  if (name == "ll-weighted") return CombineTree::kLlWeighted;
  if (name == "ht-rank") return CombineTree::kHtRank;
  return invalid_argument(field, "must be one of {{ll-weighted, ht-rank}}, got \"{}\"", name);
}

Result<std::vector<int>> resolve_expert_rank(int num_experts, int num_ranks,
                                             std::span<const int> expert_rank) {
  if (num_ranks < 1) return invalid_argument("num_ranks", "must be >= 1, got {}", num_ranks);
  if (expert_rank.empty()) {
    if (num_ranks > num_experts || num_experts % num_ranks != 0) {
      return invalid_argument("num_ranks", "must divide num_experts = {} for the default placement, got {}",
                              num_experts, num_ranks);
    }
    std::vector<int> ranks(static_cast<std::size_t>(num_experts));
    const int local = num_experts / num_ranks;
    for (int e = 0; e < num_experts; ++e) ranks[e] = e / local;
    return ranks;
  }
  if (static_cast<int>(expert_rank.size()) != num_experts) {
    return invalid_argument("expert_rank", "expected num_experts = {} entries, got {}", num_experts,
                            expert_rank.size());
  }
  for (int e = 0; e < num_experts; ++e) {
    if (expert_rank[e] < 0 || expert_rank[e] >= num_ranks) {
      return out_of_range(fmt::format("expert_rank[{}]", e), 0, num_ranks - 1, expert_rank[e]);
    }
  }
  return std::vector<int>(expert_rank.begin(), expert_rank.end());
}

namespace {

// acc = 0.0f + Σ w · fp32(y) over the valid slots that pass `take`, ascending.
template <typename Take>
void weighted_sum(std::span<const std::int32_t> experts, std::span<const float> weights,
                  std::span<const bf16> y, int hidden, Take take, CombineAccumulator& acc) {
  const auto h = static_cast<std::size_t>(hidden);
  acc.start();
  for (std::size_t k = 0; k < experts.size(); ++k) {
    if (experts[k] >= 0 && take(experts[k])) acc.add_weighted(weights[k], y.subspan(k * h, h));
  }
}

}  // namespace

void combine_token(CombineTree tree, std::span<const std::int32_t> experts, std::span<const float> weights,
                   std::span<const bf16> y, int hidden, std::span<const int> expert_rank,
                   std::span<bf16> out) {
  CombineAccumulator acc(hidden);
  if (tree == CombineTree::kLlWeighted) {
    weighted_sum(
        experts, weights, y, hidden, [](std::int32_t) { return true; }, acc);
    acc.round(out);
    return;
  }
  // Ranks owning at least one valid slot, ascending; each one's partial p_q, then their sum.
  std::vector<int> ranks;
  for (std::int32_t e : experts) {
    if (e >= 0) ranks.push_back(expert_rank[e]);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  CombineAccumulator partial(hidden);
  std::vector<bf16> p_q(static_cast<std::size_t>(hidden));
  acc.start();
  for (int q : ranks) {
    weighted_sum(
        experts, weights, y, hidden, [&](std::int32_t e) { return expert_rank[e] == q; }, partial);
    partial.round(p_q);
    acc.add(p_q);
  }
  acc.round(out);
}

}  // namespace eps
