#include "impls/transport/transport.hpp"

#include <algorithm>

namespace eps::transport {

std::string_view layout_name(Layout layout) {
  switch (layout) {
    case Layout::kHtRankMajor:
      return "ht-rank-major";
    case Layout::kHtExpertMajor:
      return "ht-expert-major";
    case Layout::kLl:
      return "ll";
  }
  return "unknown";
}

std::string_view dtype_name(PayloadType dtype) { return dtype == PayloadType::kFp8 ? "fp8" : "bf16"; }

std::vector<CombineTree> trees_for(Layout layout) {
  if (layout == Layout::kHtRankMajor) return {CombineTree::kHtRank, CombineTree::kHtTwoLevel};
  return {CombineTree::kLlWeighted};
}

namespace {

template <typename T>
bool contains(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

bool Capabilities::supports(Layout layout) const { return contains(layouts, layout); }
bool Capabilities::supports(CombineTree tree) const { return contains(combine_trees, tree); }
bool Capabilities::supports(PayloadType dtype) const { return contains(dtypes, dtype); }
bool Capabilities::fixed_order(Layout layout) const {
  return layout == Layout::kLl ? ll_ordered : !contains(open_order, layout);
}

std::int64_t recv_capacity_rows(Layout layout, const TransportConfig& config, int num_ranks) {
  const std::int64_t ranks = num_ranks;
  const std::int64_t local = num_ranks > 0 ? config.num_experts / num_ranks : 0;
  const std::int64_t t_max = config.max_tokens_per_rank;
  switch (layout) {
    case Layout::kHtRankMajor:
      return ranks * t_max;
    case Layout::kHtExpertMajor:
      return ranks * t_max * std::min<std::int64_t>(config.top_k, local) +
             local * (config.expert_alignment - 1);
    case Layout::kLl:
      return local * ranks * t_max;
  }
  return 0;
}

Status validate_config(const TransportConfig& c, int num_ranks, const Capabilities& caps) {
  if (num_ranks < 1 || num_ranks > caps.max_ranks) return out_of_range("ranks", 1, caps.max_ranks, num_ranks);
  if (c.num_experts < 1 || c.num_experts > caps.max_experts) {
    return out_of_range("num_experts", 1, caps.max_experts, c.num_experts);
  }
  if (c.num_experts % num_ranks != 0) {
    return invalid_argument("num_experts", "must be a multiple of the rank count {}, got {}", num_ranks,
                            c.num_experts);
  }
  const int max_k = std::min(c.num_experts, caps.max_top_k);
  if (c.top_k < 1 || c.top_k > max_k) return out_of_range("top_k", 1, max_k, c.top_k);
  if (c.hidden < 1 || c.hidden > caps.max_hidden) return out_of_range("hidden", 1, caps.max_hidden, c.hidden);
  if (!caps.supports(c.dtype)) {
    return invalid_argument("dtype", "{} payloads are not supported by this transport", dtype_name(c.dtype));
  }
  if (c.dtype == PayloadType::kFp8 && c.hidden % dispatch::kFp8GroupSize != 0) {
    return invalid_argument("hidden", "must be a multiple of 128 for fp8 (docs/numerics.md 1.2), got {}",
                            c.hidden);
  }
  if (c.max_tokens_per_rank < 0 || c.max_tokens_per_rank > caps.max_tokens_per_rank) {
    return out_of_range("max_tokens_per_rank", 0, caps.max_tokens_per_rank, c.max_tokens_per_rank);
  }
  if (c.expert_alignment < 1 || c.expert_alignment > dispatch::kMaxExpertAlignment) {
    return out_of_range("expert_alignment", 1, dispatch::kMaxExpertAlignment, c.expert_alignment);
  }
  if (!c.nodes.node_of.empty()) EPS_RETURN_IF_ERROR(c.nodes.check(num_ranks));
  if (!(c.timeout_seconds > 0)) {
    return invalid_argument("timeout_seconds", "must be > 0, got {}", c.timeout_seconds);
  }
  if (std::find(caps.memory.begin(), caps.memory.end(), c.memory) == caps.memory.end()) {
    return invalid_argument("memory", "this transport takes no {} memory",
                            device::memory_kind_name(c.memory));
  }
  if (c.memory == MemoryKind::kDevice && c.device == nullptr) {
    return invalid_argument("device", "device memory needs the device it belongs to, got none");
  }
  return Status();
}

}  // namespace eps::transport
