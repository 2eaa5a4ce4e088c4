#include "reference/dispatch/expert_major.hpp"

#include "reference/dispatch/detail.hpp"

namespace eps::dispatch {

std::vector<SourceToken> ExpertMajorIndex::sources() const {
  std::vector<SourceToken> out;
  out.reserve(rows.size());
  for (const ExpertMajorRow& row : rows) out.push_back(row.source);
  return out;
}

Result<ExpertMajorIndex> expert_major_index(const DispatchPlan& plan, int rank) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  const int num_local = plan.num_local_experts();
  // Bucket by local expert while scanning (r, t) in ascending order, which yields the (l, r, t) sort.
  std::vector<std::vector<ExpertMajorRow>> buckets(num_local);
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (int t = 0; t < plan.num_tokens(r); ++t) {
      for (int k = 0; k < plan.top_k(); ++k) {
        const SlotPlacement p = plan.placement(r, t, k);
        if (p.rank != rank) continue;
        buckets[p.local].push_back({p.local, {r, t}, k, plan.topk_weights(r, t)[k]});
      }
    }
  }
  ExpertMajorIndex index;
  index.rank = rank;
  index.segment_begin.push_back(0);
  for (int l = 0; l < num_local; ++l) {
    const int count = static_cast<int>(buckets[l].size());
    const int padded = detail::align_up(count, plan.config().expert_alignment);
    index.counts.push_back(count);
    index.rows.insert(index.rows.end(), buckets[l].begin(), buckets[l].end());
    index.rows.resize(index.rows.size() + static_cast<std::size_t>(padded - count),
                      ExpertMajorRow{l, {}, -1, 0.0f});
    index.segment_begin.push_back(index.segment_begin.back() + padded);
  }
  return index;
}

Result<ExpertMajorExpected> expected_expert_major(const DispatchPlan& plan, int rank,
                                                  const RowSource& source) {
  ExpertMajorExpected expected;
  EPS_ASSIGN_OR_RETURN(expected.index, expert_major_index(plan, rank));
  const std::size_t rows = expected.index.rows.size();
  expected.recv_x.assign(rows * plan.row_bytes(), std::byte{0});
  expected.recv_x_scales.assign(rows * static_cast<std::size_t>(plan.num_scales()), 0.0f);
  detail::fetch_rows(plan, source, expected.index.sources(), expected.recv_x, expected.recv_x_scales);
  return expected;
}

MismatchReport compare_expert_major(const DispatchPlan& plan, const ExpertMajorExpected& expected,
                                    const ExpertMajorView& actual) {
  MismatchReport report;
  const int q = expected.index.rank;
  const std::vector<SourceToken> sources = expected.index.sources();
  detail::compare_payload_rows(report, plan, q, sources, expected.recv_x, expected.recv_x_scales,
                               actual.recv_x, actual.recv_x_scales);
  std::vector<float> weights;
  weights.reserve(expected.index.rows.size());
  for (const ExpertMajorRow& row : expected.index.rows) weights.push_back(row.weight);
  compare_rows<float>(report, "recv_weights", q, sources, weights, actual.recv_weights, 1);
  return report;
}

}  // namespace eps::dispatch
