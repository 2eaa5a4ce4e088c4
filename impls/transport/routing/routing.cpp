#include "impls/transport/routing/routing.hpp"

#include <utility>

namespace eps::transport {
namespace {

// The (t, k) of every record, bucketed by key (see SendPlan), t ascending within a key.
std::vector<std::vector<std::pair<int, int>>> bucket_records(Layout layout, const TransportConfig& config,
                                                             int num_ranks, const SendPlan& plan) {
  const int k_max = config.top_k;
  const int local = config.num_experts / num_ranks;
  const bool rank_major = layout == Layout::kHtRankMajor;
  std::vector<std::vector<std::pair<int, int>>> buckets(
      static_cast<std::size_t>(rank_major ? num_ranks : config.num_experts));
  std::vector<int> marked(static_cast<std::size_t>(num_ranks), -1);
  for (int t = 0; t < plan.num_tokens; ++t) {
    for (int k = 0; k < k_max; ++k) {
      const int e = plan.topk_idx[static_cast<std::size_t>(t) * k_max + k];
      if (e < 0) continue;
      const int q = e / local;
      if (!rank_major) {
        buckets[static_cast<std::size_t>(e)].emplace_back(t, k);
      } else if (marked[static_cast<std::size_t>(q)] != t) {
        marked[static_cast<std::size_t>(q)] = t;
        buckets[static_cast<std::size_t>(q)].emplace_back(t, -1);
      }
    }
  }
  return buckets;
}

}  // namespace

SendPlan plan_sends(Layout layout, const TransportConfig& config, int num_ranks, const DispatchInput& in) {
  SendPlan plan;
  plan.layout = layout;
  plan.num_tokens = in.num_tokens;
  plan.topk_idx.assign(in.topk_idx.begin(), in.topk_idx.end());
  plan.topk_weights.assign(in.topk_weights.begin(), in.topk_weights.end());
  plan.key_begin.assign(1, 0);
  for (const auto& bucket : bucket_records(layout, config, num_ranks, plan)) {
    for (const auto& [t, k] : bucket) {
      plan.record_token.push_back(t);
      plan.record_slot.push_back(k);
    }
    plan.key_begin.push_back(plan.records());
  }
  plan.record_row.assign(plan.record_token.begin(), plan.record_token.end());
  // Records to destination q are those of keys [q * per_peer, (q + 1) * per_peer).
  const int per_peer = layout == Layout::kHtRankMajor ? 1 : config.num_experts / num_ranks;
  plan.destination_begin.assign(static_cast<std::size_t>(num_ranks) + 1, 0);
  for (int q = 0; q <= num_ranks; ++q)
    plan.destination_begin[static_cast<std::size_t>(q)] =
        plan.key_begin[static_cast<std::size_t>(q * per_peer)];
  return plan;
}

dispatch::DispatchLayout local_layout(const TransportConfig& config, int num_ranks, int rank, int num_tokens,
                                      std::span<const int> topk_idx) {
  const int local = config.num_experts / num_ranks;
  dispatch::DispatchLayout l;
  l.rank = rank;
  l.num_tokens_per_rank.assign(static_cast<std::size_t>(num_ranks), 0);
  l.num_tokens_per_expert.assign(static_cast<std::size_t>(config.num_experts), 0);
  l.is_token_in_rank.assign(static_cast<std::size_t>(num_tokens) * num_ranks, 0);
  for (int t = 0; t < num_tokens; ++t) {
    for (int k = 0; k < config.top_k; ++k) {
      const int e = topk_idx[static_cast<std::size_t>(t) * config.top_k + k];
      if (e < 0) continue;
      ++l.num_tokens_per_expert[static_cast<std::size_t>(e)];
      std::uint8_t& in_rank = l.is_token_in_rank[static_cast<std::size_t>(t) * num_ranks + e / local];
      if (in_rank == 0) ++l.num_tokens_per_rank[static_cast<std::size_t>(e / local)];
      in_rank = 1;
    }
  }
  return l;
}

std::vector<int> rank_prefix_matrix(int num_ranks, std::span<const int> all_per_rank) {
  std::vector<int> prefix(all_per_rank.size(), 0);
  for (int i = 0; i < num_ranks; ++i) {
    for (int j = 0; j < num_ranks; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * num_ranks + j;
      prefix[at] = all_per_rank[at] + (i > 0 ? prefix[at - static_cast<std::size_t>(num_ranks)] : 0);
    }
  }
  return prefix;
}

void localize_routing(const TransportConfig& config, int num_ranks, int rank, const std::int32_t* topk_idx,
                      const float* topk_weights, int* recv_topk_idx, float* recv_topk_weights) {
  const int local = config.num_experts / num_ranks;
  for (int k = 0; k < config.top_k; ++k) {
    const int e = topk_idx[k];
    const bool here = e >= 0 && e / local == rank;
    recv_topk_idx[k] = here ? e % local : -1;
    recv_topk_weights[k] = here ? topk_weights[k] : 0.0f;
  }
}

void count_rank_major(const TransportConfig& config, int num_ranks, std::int64_t rows,
                      const DispatchOutput& out) {
  const int local = config.num_experts / num_ranks;
  const int align = config.expert_alignment;
  std::vector<int> counts(static_cast<std::size_t>(local), 0);
  for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
    for (int k = 0; k < config.top_k; ++k) {
      const int l = out.recv_topk_idx[row * config.top_k + k];
      if (l >= 0) ++counts[static_cast<std::size_t>(l)];
    }
  }
  for (int l = 0; l < local; ++l) {
    out.num_recv_tokens_per_expert[static_cast<std::size_t>(l)] =
        (counts[static_cast<std::size_t>(l)] + align - 1) / align * align;
  }
}

}  // namespace eps::transport
