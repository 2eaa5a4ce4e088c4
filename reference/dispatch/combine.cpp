#include "reference/dispatch/combine.hpp"

#include <algorithm>

#include "reference/dispatch/detail.hpp"

namespace eps {

std::string_view combine_tree_name(CombineTree tree) {
  switch (tree) {
    case CombineTree::kHtRank:
      return "ht-rank";
    case CombineTree::kHtTwoLevel:
      return "ht-two-level";
    case CombineTree::kLlWeighted:
      return "ll-weighted";
  }
  return "unknown";
}

void CombineAccumulator::start(std::span<const bf16> bias0, std::span<const bf16> bias1) {
  for (std::size_t h = 0; h < acc_.size(); ++h) {
    const float first = bias0.empty() ? 0.0f : bias0[h].to_float();
    acc_[h] = first + (bias1.empty() ? 0.0f : bias1[h].to_float());
  }
}

void CombineAccumulator::add(std::span<const bf16> row) {
  for (std::size_t h = 0; h < acc_.size(); ++h) acc_[h] = acc_[h] + row[h].to_float();
}

void CombineAccumulator::add_weighted(float weight, std::span<const bf16> row) {
  for (std::size_t h = 0; h < acc_.size(); ++h) {
    const float product = weight * row[h].to_float();
    acc_[h] = acc_[h] + product;
  }
}

void CombineAccumulator::round(std::span<bf16> out) const {
  for (std::size_t h = 0; h < acc_.size(); ++h) out[h] = bf16::from_float(acc_[h]);
}

}  // namespace eps

namespace eps::dispatch {
namespace {

// The bias rows of (rank, token) as CombineAccumulator::start takes them (empty where absent).
void start_with_bias(const CombineBias& bias, int rank, int token, std::span<bf16> bias0,
                     std::span<bf16> bias1, CombineAccumulator& acc) {
  if (bias.bias0) bias.bias0(rank, token, bias0);
  if (bias.bias1) bias.bias1(rank, token, bias1);
  acc.start(bias.bias0 ? bias0 : std::span<bf16>(), bias.bias1 ? bias1 : std::span<bf16>());
}

// Runs `combine_row(t, out_row)` for every token of `rank` into a [T_rank, H] output.
template <typename RowFn>
std::vector<bf16> combine_rows(const DispatchPlan& plan, int rank, RowFn combine_row) {
  const auto hidden = static_cast<std::size_t>(plan.hidden());
  std::vector<bf16> out(static_cast<std::size_t>(plan.num_tokens(rank)) * hidden);
  for (int t = 0; t < plan.num_tokens(rank); ++t) {
    combine_row(t, std::span<bf16>(out).subspan(static_cast<std::size_t>(t) * hidden, hidden));
  }
  return out;
}

}  // namespace

Result<std::vector<bf16>> expected_ht_rank_combine(const DispatchPlan& plan, int rank,
                                                   const PartialRowFn& partial, const CombineBias& bias) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  const auto hidden = static_cast<std::size_t>(plan.hidden());
  CombineAccumulator acc(plan.hidden());
  std::vector<bf16> scratch(hidden), bias0(hidden), bias1(hidden);
  return combine_rows(plan, rank, [&](int t, std::span<bf16> out) {
    start_with_bias(bias, rank, t, bias0, bias1, acc);
    for (int q : plan.dst_ranks(rank, t)) {
      partial(q, rank, t, scratch);
      acc.add(scratch);
    }
    acc.round(out);
  });
}

Result<std::vector<bf16>> expected_ht_two_level_combine(const DispatchPlan& plan, int rank,
                                                        const NodeLayout& nodes, const PartialRowFn& partial,
                                                        const CombineBias& bias) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  EPS_RETURN_IF_ERROR(nodes.check(plan.num_ranks()));
  const auto hidden = static_cast<std::size_t>(plan.hidden());
  CombineAccumulator acc(plan.hidden()), node_acc(plan.hidden());
  std::vector<bf16> scratch(hidden), node_row(hidden), bias0(hidden), bias1(hidden);
  return combine_rows(plan, rank, [&](int t, std::span<bf16> out) {
    start_with_bias(bias, rank, t, bias0, bias1, acc);
    const std::span<const int> dst = plan.dst_ranks(rank, t);
    // Nodes ascending; inside a node its destinations ascending (dst is ascending). A node may hold
    // non-consecutive ranks, so each node filters the whole list.
    for (int node = 0; node < nodes.nodes(); ++node) {
      bool any = false;
      node_acc.start();
      for (int q : dst) {
        if (nodes.node_of[static_cast<std::size_t>(q)] != node) continue;
        partial(q, rank, t, scratch);
        node_acc.add(scratch);
        any = true;
      }
      if (!any) continue;
      node_acc.round(node_row);
      acc.add(node_row);
    }
    acc.round(out);
  });
}

Result<std::vector<bf16>> expected_ll_combine(const DispatchPlan& plan, int rank,
                                              const SlotOutputFn& slot_output) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  CombineAccumulator acc(plan.hidden());
  std::vector<bf16> y(static_cast<std::size_t>(plan.hidden()));
  return combine_rows(plan, rank, [&](int t, std::span<bf16> out) {
    acc.start();
    const std::span<const int> idx = plan.topk_idx(rank, t);
    const std::span<const float> weights = plan.topk_weights(rank, t);
    for (int k = 0; k < plan.top_k(); ++k) {
      if (idx[k] < 0) continue;
      slot_output(rank, t, k, y);
      acc.add_weighted(weights[k], y);
    }
    acc.round(out);
  });
}

MismatchReport compare_combine(const DispatchPlan& plan, int rank, std::span<const bf16> expected,
                               std::span<const bf16> actual) {
  std::vector<SourceToken> sources;
  for (int t = 0; rank >= 0 && rank < plan.num_ranks() && t < plan.num_tokens(rank); ++t)
    sources.push_back({rank, t});
  MismatchReport report;
  compare_rows<bf16>(report, "combined_x", rank, sources, expected, actual,
                     static_cast<std::size_t>(plan.hidden()));
  return report;
}

MismatchReport compare_combined_weights(const DispatchPlan& plan, int rank, std::span<const float> actual) {
  MismatchReport report;
  if (rank < 0 || rank >= plan.num_ranks()) {
    report.add(Mismatch{"combined_topk_weights", rank, -1, -1, -1, 0, 0, "rank out of range"});
    return report;
  }
  const auto top_k = static_cast<std::size_t>(plan.top_k());
  const std::size_t expected_size = static_cast<std::size_t>(plan.num_tokens(rank)) * top_k;
  if (actual.size() != expected_size) {
    report.add(Mismatch{"combined_topk_weights", rank, -1, -1, -1, expected_size, actual.size(),
                        "element count differs"});
  }
  for (int t = 0; t < plan.num_tokens(rank) && (static_cast<std::size_t>(t) + 1) * top_k <= actual.size();
       ++t) {
    const std::span<const int> idx = plan.topk_idx(rank, t);
    const std::span<const float> weights = plan.topk_weights(rank, t);
    for (std::size_t k = 0; k < top_k; ++k) {
      const float got = actual[static_cast<std::size_t>(t) * top_k + k];
      if (idx[k] < 0 || float_bits(got) == float_bits(weights[k])) continue;
      report.add(Mismatch{"combined_topk_weights",
                          rank,
                          rank,
                          t,
                          static_cast<std::int64_t>(k),
                          float_bits(weights[k]),
                          float_bits(got),
                          {}});
    }
  }
  return report;
}

}  // namespace eps::dispatch
