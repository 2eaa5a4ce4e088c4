#include "reference/dispatch/dispatch_plan.hpp"

#include <algorithm>
#include <cmath>

namespace eps::dispatch {
namespace {

Status check_config(const DispatchConfig& c) {
  if (c.num_ranks < 1 || c.num_ranks > kMaxRanks) return out_of_range("num_ranks", 1, kMaxRanks, c.num_ranks);
  if (c.num_experts < 1 || c.num_experts > kMaxExperts) {
    return out_of_range("num_experts", 1, kMaxExperts, c.num_experts);
  }
  if (c.top_k < 1 || c.top_k > kMaxTopK) return out_of_range("top_k", 1, kMaxTopK, c.top_k);
  if (c.hidden < 1 || c.hidden > kMaxHidden) return out_of_range("hidden", 1, kMaxHidden, c.hidden);
  if (c.dtype == PayloadType::kFp8 && c.hidden % kFp8GroupSize != 0) {
    return invalid_argument("hidden",
                            "must be a multiple of {} for fp8 payloads (docs/numerics.md 1.2), got {}",
                            kFp8GroupSize, c.hidden);
  }
  if (c.max_tokens_per_rank < 0 || c.max_tokens_per_rank > kMaxTokensPerRank) {
    return out_of_range("max_tokens_per_rank", 0, kMaxTokensPerRank, c.max_tokens_per_rank);
  }
  if (c.expert_alignment < 1 || c.expert_alignment > kMaxExpertAlignment) {
    return out_of_range("expert_alignment", 1, kMaxExpertAlignment, c.expert_alignment);
  }
  return Status::ok_status();
}

Status check_placement(const DispatchConfig& c, const ExpertMap& map) {
  if (map.num_ranks() != c.num_ranks) {
    return invalid_argument("placement.num_ranks", "must equal num_ranks ({}), got {}", c.num_ranks,
                            map.num_ranks());
  }
  if (map.num_experts() != c.num_experts) {
    return invalid_argument("placement.num_experts", "must equal num_experts ({}), got {}", c.num_experts,
                            map.num_experts());
  }
  return Status::ok_status();
}

Status check_token(const DispatchConfig& c, int r, int t, std::span<const int> idx,
                   std::span<const float> w) {
  for (int k = 0; k < c.top_k; ++k) {
    if (idx[k] < -1 || idx[k] >= c.num_experts) {
      return out_of_range(fmt::format("routing[{}].topk_idx[{}][{}]", r, t, k), -1, c.num_experts - 1,
                          idx[k]);
    }
    if (idx[k] == -1) continue;
    if (std::isnan(w[k]))
      return invalid_argument(fmt::format("routing[{}].topk_weights[{}][{}]", r, t, k),
                              "must not be NaN on a valid slot");
    for (int j = 0; j < k; ++j) {
      if (idx[j] == idx[k]) {
        return invalid_argument(
            fmt::format("routing[{}].topk_idx[{}]", r, t),
            "expert {} appears in slots {} and {}; the experts of one token must be distinct", idx[k], j, k);
      }
    }
  }
  return Status::ok_status();
}

Status check_rank(const DispatchConfig& c, int r, const RankRouting& routing) {
  if (routing.num_tokens < 0 || routing.num_tokens > c.max_tokens_per_rank) {
    return out_of_range(fmt::format("routing[{}].num_tokens", r), 0, c.max_tokens_per_rank,
                        routing.num_tokens);
  }
  const std::size_t size = static_cast<std::size_t>(routing.num_tokens) * static_cast<std::size_t>(c.top_k);
  if (routing.topk_idx.size() != size) {
    return invalid_argument(fmt::format("routing[{}].topk_idx", r),
                            "size must be num_tokens * top_k = {}, got {}", size, routing.topk_idx.size());
  }
  if (routing.topk_weights.size() != size) {
    return invalid_argument(fmt::format("routing[{}].topk_weights", r),
                            "size must be num_tokens * top_k = {}, got {}", size,
                            routing.topk_weights.size());
  }
  const std::span<const int> idx(routing.topk_idx);
  const std::span<const float> w(routing.topk_weights);
  for (int t = 0; t < routing.num_tokens; ++t) {
    const std::size_t begin = static_cast<std::size_t>(t) * c.top_k;
    EPS_RETURN_IF_ERROR(check_token(c, r, t, idx.subspan(begin, c.top_k), w.subspan(begin, c.top_k)));
  }
  return Status::ok_status();
}

}  // namespace

std::size_t payload_row_bytes(PayloadType dtype, int hidden) {
  return static_cast<std::size_t>(hidden) * (dtype == PayloadType::kBf16 ? 2 : 1);
}

int payload_num_scales(PayloadType dtype, int hidden) {
  return dtype == PayloadType::kFp8 ? hidden / kFp8GroupSize : 0;
}

Result<DispatchPlan> DispatchPlan::make(const DispatchConfig& config, std::vector<RankRouting> routing,
                                        std::optional<ExpertMap> placement) {
  EPS_RETURN_IF_ERROR(check_config(config));
  if (!placement) {
    EPS_ASSIGN_OR_RETURN(ExpertMap default_map,
                         ExpertMap::make_default(config.num_ranks, config.num_experts));
    placement = std::move(default_map);
  }
  EPS_RETURN_IF_ERROR(check_placement(config, *placement));
  if (routing.size() != static_cast<std::size_t>(config.num_ranks)) {
    return invalid_argument("routing", "must have one entry per rank ({}), got {}", config.num_ranks,
                            routing.size());
  }
  for (int r = 0; r < config.num_ranks; ++r) EPS_RETURN_IF_ERROR(check_rank(config, r, routing[r]));

  DispatchPlan plan(std::move(*placement));
  plan.config_ = config;
  plan.routing_ = std::move(routing);
  plan.token_begin_.assign(static_cast<std::size_t>(config.num_ranks) + 1, 0);
  for (int r = 0; r < config.num_ranks; ++r) {
    plan.token_begin_[r + 1] = plan.token_begin_[r] + static_cast<std::size_t>(plan.routing_[r].num_tokens);
  }
  const std::size_t total = plan.token_begin_.back();
  const auto k_count = static_cast<std::size_t>(config.top_k);
  plan.placements_.resize(total * k_count);
  plan.dst_ranks_.assign(total * k_count, -1);
  plan.dst_count_.assign(total, 0);
  for (int r = 0; r < config.num_ranks; ++r) {
    for (int t = 0; t < plan.routing_[r].num_tokens; ++t) {
      const std::size_t f = plan.flat(r, t);
      const std::span<const int> idx = plan.topk_idx(r, t);
      int* dst = plan.dst_ranks_.data() + f * k_count;
      int& count = plan.dst_count_[f];
      for (int k = 0; k < config.top_k; ++k) {
        if (idx[k] < 0) continue;
        const SlotPlacement p = plan.map_.place(idx[k], t, k, config.top_k);
        plan.placements_[f * k_count + k] = p;
        if (std::find(dst, dst + count, p.rank) == dst + count) dst[count++] = p.rank;
      }
      std::sort(dst, dst + count);
    }
  }
  return plan;
}

std::span<const int> DispatchPlan::topk_idx(int rank, int token) const {
  return std::span<const int>(routing_[rank].topk_idx)
      .subspan(static_cast<std::size_t>(token) * top_k(), top_k());
}

std::span<const float> DispatchPlan::topk_weights(int rank, int token) const {
  return std::span<const float>(routing_[rank].topk_weights)
      .subspan(static_cast<std::size_t>(token) * top_k(), top_k());
}

SlotPlacement DispatchPlan::placement(int rank, int token, int k) const {
  return placements_[flat(rank, token) * static_cast<std::size_t>(top_k()) + k];
}

std::span<const int> DispatchPlan::dst_ranks(int rank, int token) const {
  const std::size_t f = flat(rank, token);
  return std::span<const int>(dst_ranks_).subspan(f * static_cast<std::size_t>(top_k()), dst_count_[f]);
}

bool DispatchPlan::sends_to(int rank, int token, int dst) const {
  const std::span<const int> d = dst_ranks(rank, token);
  return std::binary_search(d.begin(), d.end(), dst);
}

}  // namespace eps::dispatch
