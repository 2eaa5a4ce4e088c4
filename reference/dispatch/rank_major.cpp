#include "reference/dispatch/rank_major.hpp"

#include "reference/dispatch/detail.hpp"

namespace eps::dispatch {

Result<RankMajorIndex> rank_major_index(const DispatchPlan& plan, int rank) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  const int top_k = plan.top_k();
  RankMajorIndex index;
  index.rank = rank;
  index.num_recv_tokens_per_expert.assign(plan.num_local_experts(), 0);
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (int t = 0; t < plan.num_tokens(r); ++t) {
      if (!plan.sends_to(r, t, rank)) continue;
      index.sources.push_back({r, t});
      const std::span<const float> weights = plan.topk_weights(r, t);
      for (int k = 0; k < top_k; ++k) {
        const SlotPlacement p = plan.placement(r, t, k);
        const bool local = p.rank == rank;
        index.recv_topk_idx.push_back(local ? p.local : -1);
        index.recv_topk_weights.push_back(local ? weights[k] : 0.0f);
        if (local) ++index.num_recv_tokens_per_expert[p.local];
      }
    }
  }
  for (int& count : index.num_recv_tokens_per_expert)
    count = detail::align_up(count, plan.config().expert_alignment);
  return index;
}

Result<RankMajorExpected> expected_rank_major(const DispatchPlan& plan, int rank, const RowSource& source) {
  RankMajorExpected expected;
  EPS_ASSIGN_OR_RETURN(expected.index, rank_major_index(plan, rank));
  const std::size_t rows = expected.index.num_rows();
  expected.recv_x.resize(rows * plan.row_bytes());
  expected.recv_x_scales.resize(rows * static_cast<std::size_t>(plan.num_scales()));
  detail::fetch_rows(plan, source, expected.index.sources, expected.recv_x, expected.recv_x_scales);
  return expected;
}

MismatchReport compare_rank_major(const DispatchPlan& plan, const RankMajorExpected& expected,
                                  const RankMajorView& actual) {
  MismatchReport report;
  const RankMajorIndex& index = expected.index;
  const int q = index.rank;
  const std::span<const SourceToken> sources(index.sources);
  detail::compare_payload_rows(report, plan, q, sources, expected.recv_x, expected.recv_x_scales,
                               actual.recv_x, actual.recv_x_scales);
  const auto top_k = static_cast<std::size_t>(plan.top_k());
  compare_rows<int>(report, "recv_topk_idx", q, sources, index.recv_topk_idx, actual.recv_topk_idx, top_k);
  compare_rows<float>(report, "recv_topk_weights", q, sources, index.recv_topk_weights,
                      actual.recv_topk_weights, top_k);
  compare_array<int>(report, "num_recv_tokens_per_expert", q, index.num_recv_tokens_per_expert,
                     actual.num_recv_tokens_per_expert);
  return report;
}

}  // namespace eps::dispatch
