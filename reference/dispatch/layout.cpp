#include "reference/dispatch/layout.hpp"

#include <algorithm>

#include "reference/dispatch/detail.hpp"

namespace eps::dispatch {

std::vector<int> rank_prefix_matrix(const DispatchPlan& plan) {
  const auto n = static_cast<std::size_t>(plan.num_ranks());
  std::vector<int> matrix(n * n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) std::copy(matrix.begin() + (i - 1) * n, matrix.begin() + i * n, matrix.begin() + i * n);
    for (int t = 0; t < plan.num_tokens(static_cast<int>(i)); ++t) {
      for (int q : plan.dst_ranks(static_cast<int>(i), t)) ++matrix[i * n + q];
    }
  }
  return matrix;
}

Result<DispatchLayout> expected_layout(const DispatchPlan& plan, int rank) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  const int num_ranks = plan.num_ranks();
  const int slots_per_rank = plan.num_local_experts();
  DispatchLayout layout;
  layout.rank = rank;
  layout.num_tokens_per_rank.assign(num_ranks, 0);
  layout.num_tokens_per_expert.assign(static_cast<std::size_t>(plan.expert_map().num_slots()), 0);
  layout.is_token_in_rank.assign(static_cast<std::size_t>(plan.num_tokens(rank)) * num_ranks, 0);
  for (int t = 0; t < plan.num_tokens(rank); ++t) {
    for (int q : plan.dst_ranks(rank, t)) {
      ++layout.num_tokens_per_rank[q];
      layout.is_token_in_rank[static_cast<std::size_t>(t) * num_ranks + q] = 1;
    }
    for (int k = 0; k < plan.top_k(); ++k) {
      const SlotPlacement p = plan.placement(rank, t, k);
      if (p.rank >= 0)
        ++layout.num_tokens_per_expert[static_cast<std::size_t>(p.rank) * slots_per_rank + p.local];
    }
  }
  layout.rank_prefix_matrix = rank_prefix_matrix(plan);
  return layout;
}

}  // namespace eps::dispatch
