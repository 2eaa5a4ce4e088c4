#include "impls/layer/layer_spec.hpp"

#include <algorithm>
#include <numeric>
#include <variant>

#include <fmt/format.h>

#include "reference/data/values.hpp"

namespace eps::layer {

std::int64_t LayerSpec::num_tokens() const {
  return std::accumulate(rank_tokens.begin(), rank_tokens.end(), std::int64_t{0});
}

std::int64_t LayerSpec::first_token(int rank) const {
  return std::accumulate(rank_tokens.begin(), rank_tokens.begin() + rank, std::int64_t{0});
}

std::int64_t LayerSpec::max_rank_tokens() const {
  return rank_tokens.empty() ? 0 : *std::max_element(rank_tokens.begin(), rank_tokens.end());
}

CombineTree layer_tree(transport::Layout layout) {
  return layout == transport::Layout::kHtRankMajor ? CombineTree::kHtRank : CombineTree::kLlWeighted;
}

int slot_width(const LayerSpec& spec) {
  if (spec.routing_workload) return spec.routing_top_k;
  if (const auto* tc = std::get_if<routing::TokenChoiceConfig>(&spec.router)) return static_cast<int>(tc->k);
  return std::min(spec.num_experts, dispatch::kMaxTopK);
}

MoeLayerConfig reference_layer_config(const LayerSpec& spec, int layer) {
  MoeLayerConfig c;
  c.seed = spec.seed;
  c.layer = static_cast<std::uint32_t>(layer);
  c.hidden = spec.hidden;
  c.ffn = spec.ffn;
  c.num_experts = spec.num_experts;
  c.num_shared = spec.num_shared;
  c.shared_ffn = spec.shared_ffn;
  c.seq_len = spec.seq_len;
  c.num_samples = spec.seq_len > 0 ? spec.num_tokens() / spec.seq_len : 0;
  c.router = spec.router;
  c.mask_ratio = spec.mask_ratio;
  c.logits = LogitsSource::kGenerated;
  c.combine = layer_tree(spec.layout);
  c.num_ranks = spec.num_ranks();
  c.kernel = ExpertKernelKind::kVectorized;
  c.routing_groups = spec.rank_tokens;
  c.dispatch_dtype = spec.dtype;
  return c;
}

transport::TransportConfig layer_transport_config(const LayerSpec& spec, MPI_Comm comm,
                                                  device::Device* device, double timeout_seconds) {
  transport::TransportConfig c;
  c.comm = comm;
  c.num_experts = spec.slots();
  c.top_k = slot_width(spec);
  c.hidden = spec.hidden;
  c.max_tokens_per_rank = static_cast<int>(spec.max_rank_tokens());
  c.dtype = spec.dtype;
  c.expert_alignment = 1;
  c.timeout_seconds = timeout_seconds;
  c.device = device;
  c.memory = device ? transport::MemoryKind::kDevice : transport::MemoryKind::kHost;
  return c;
}

namespace {

bool batch_scope_expert_choice(const LayerSpec& spec) {
  const auto* ec = std::get_if<routing::ExpertChoiceConfig>(&spec.router);
  return ec && ec->scope == routing::CapacityScope::kBatch;
}

// num_slots, ranks_per_node and step (see layer_spec.hpp).
Status validate_placement_fields(const LayerSpec& spec) {
  const int ranks = spec.num_ranks();
  if (spec.num_slots != 0 && (spec.num_slots < spec.num_experts || spec.num_slots % ranks != 0 ||
                              spec.num_slots > kMaxLayerExperts)) {
    return invalid_argument(
        "num_slots",
        "must be 0 (one slot per expert) or a multiple of the rank count {} in [E = {}, {}], "
        "got {}",
        ranks, spec.num_experts, kMaxLayerExperts, spec.num_slots);
  }
  if (spec.num_slots != 0 && spec.num_slots != spec.num_experts &&
      spec.layout == transport::Layout::kHtRankMajor) {
    return invalid_argument(
        "layout",
        "ht-rank-major combines with the ht-rank tree, which depends on where each expert "
        "lives; replicated placements (num_slots {}) need ll or ht-expert-major",
        spec.num_slots);
  }
  if (spec.ranks_per_node < 1 || ranks % spec.ranks_per_node != 0) {
    return invalid_argument("ranks_per_node", "must divide the rank count {}, got {}", ranks,
                            spec.ranks_per_node);
  }
  if (spec.step < 0 || spec.step > static_cast<int>(data::kMaxStep)) {
    return out_of_range("step", 0, static_cast<int>(data::kMaxStep), spec.step);
  }
  return Status();
}

}  // namespace

Status validate_layer_spec(const LayerSpec& spec) {
  const int ranks = spec.num_ranks();
  if (ranks < 1) return invalid_argument("rank_tokens", "need one token count per rank, got none");
  if (spec.num_layers < 1 || spec.num_layers > kMaxLayers) {
    return out_of_range("layers", 1, kMaxLayers, spec.num_layers);
  }
  if (spec.seq_len < 1) return out_of_range<std::int64_t>("seq_len", 1, kMaxLayerTokens, spec.seq_len);
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t n = spec.rank_tokens[r];
    if (n < 0 || n % spec.seq_len != 0) {
      return invalid_argument(fmt::format("rank_tokens[{}]", r),
                              "{} tokens is not a multiple of seq_len {} (nor 0)", n, spec.seq_len);
    }
  }
  if (spec.num_tokens() < spec.seq_len) {
    return invalid_argument("rank_tokens",
                            "the ranks hold {} tokens in all, fewer than one sample of seq_len {}",
                            spec.num_tokens(), spec.seq_len);
  }
  if (spec.num_experts < 1 || spec.num_experts % ranks != 0) {
    return invalid_argument("num_experts", "must be a positive multiple of the rank count {}, got {}", ranks,
                            spec.num_experts);
  }
  if (ranks > 1 && batch_scope_expert_choice(spec)) {
    return invalid_argument(
        "router.scope",
        "expert-choice batch scope selects across every rank's tokens; a distributed layer "
        "routes each rank's tokens where they live (docs/layer.md 4.4): use sequence scope");
  }
  EPS_RETURN_IF_ERROR(validate_moe_layer_config(reference_layer_config(spec, spec.num_layers - 1)));
  EPS_RETURN_IF_ERROR(validate_placement_fields(spec));
  if (spec.routing_workload) {
    const data::RoutingShape shape{ranks, spec.num_experts, spec.routing_top_k};
    EPS_RETURN_IF_ERROR(data::validate_workload(*spec.routing_workload, shape));
    const std::shared_ptr<const data::RoutingTrace>& trace = spec.routing_workload->trace;
    for (int r = 0; trace && r < ranks; ++r) {
      if (trace->num_tokens(static_cast<std::size_t>(r)) < spec.rank_tokens[r]) {
        return invalid_argument("routing", "rank {} has {} tokens in trace '{}', the layer needs {}", r,
                                trace->num_tokens(static_cast<std::size_t>(r)),
                                spec.routing_workload->trace_path, spec.rank_tokens[r]);
      }
    }
  }
  transport::Capabilities limits;
  limits.max_ranks = ranks;
  limits.max_experts = kMaxLayerExperts;
  limits.max_top_k = dispatch::kMaxTopK;
  limits.max_hidden = kMaxExpertDim;
  limits.max_tokens_per_rank = static_cast<int>(kMaxLayerTokens);
  limits.dtypes = {dispatch::PayloadType::kBf16, dispatch::PayloadType::kFp8};
  limits.memory = {transport::MemoryKind::kHost};
  return transport::validate_config(layer_transport_config(spec, MPI_COMM_WORLD, nullptr, 1.0), ranks,
                                    limits);
}

Result<routing::Routing> workload_routing(const LayerSpec& spec, int layer, int rank) {
  if (!spec.routing_workload) return invalid_argument("routing", "the layer has no routing workload");
  const data::RoutingShape shape{spec.num_ranks(), spec.num_experts, spec.routing_top_k};
  data::RoutingRequest request;
  request.seed = spec.seed;
  request.rank = rank;
  request.layer = layer;
  request.step = spec.step;
  request.num_tokens = spec.rank_tokens[rank];
  request.sequence_length = static_cast<int>(spec.seq_len);
  EPS_ASSIGN_OR_RETURN(const data::Routing given,
                       data::generate_routing(*spec.routing_workload, shape, request));
  return routing::routing_from_topk(given.topk_idx, given.topk_weights, given.num_tokens, spec.num_experts,
                                    given.top_k, spec.seq_len);
}

namespace {

// Every rank's workload routing at `layer`, joined in rank order (the reference's routing of all T tokens).
Result<routing::Routing> joined_workload_routing(const LayerSpec& spec, int layer) {
  std::vector<routing::Routing> parts;
  for (int r = 0; r < spec.num_ranks(); ++r) {
    EPS_ASSIGN_OR_RETURN(routing::Routing part, workload_routing(spec, layer, r));
    parts.push_back(std::move(part));
  }
  return routing::join_routings(parts);
}

}  // namespace

OutputMismatches compare_with_reference(const LayerSpec& spec, int rank, std::span<const bf16> got,
                                        std::span<const bf16> reference) {
  const std::int64_t first_token = spec.first_token(rank);
  const std::span<const bf16> want = reference.subspan(static_cast<std::size_t>(first_token * spec.hidden));
  OutputMismatches m;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i < want.size() && got[i].bits == want[i].bits) continue;
    if (m.count++ > 0) continue;
    const float reference_value = i < want.size() ? want[i].to_float() : 0.0f;
    m.first =
        fmt::format("rank {} token {} channel {}: got {:#06x} ({}), reference {:#06x} ({})", rank,
                    first_token + static_cast<std::int64_t>(i) / spec.hidden, i % spec.hidden, got[i].bits,
                    got[i].to_float(), i < want.size() ? want[i].bits : 0, reference_value);
  }
  return m;
}

Result<std::vector<bf16>> reference_stack_output(const LayerSpec& spec) {
  EPS_RETURN_IF_ERROR(validate_layer_spec(spec));
  std::vector<bf16> x;
  for (int layer = 0; layer < spec.num_layers; ++layer) {
    const MoeLayerConfig config = reference_layer_config(spec, layer);
    EPS_ASSIGN_OR_RETURN(MoeLayerInputs inputs, generate_moe_layer_inputs(config));
    if (layer > 0) inputs.x = std::move(x);
    if (spec.routing_workload) {
      EPS_ASSIGN_OR_RETURN(inputs.routing, joined_workload_routing(spec, layer));
    }
    EPS_ASSIGN_OR_RETURN(MoeLayerResult result, run_moe_layer(config, inputs));
    x = std::move(result.out);
  }
  return x;
}

}  // namespace eps::layer
