#include "reference/layer/moe_layer.hpp"

#include <algorithm>

#include "reference/data/fill.hpp"
#include "reference/numerics/quant.hpp"

namespace eps {

std::string_view logits_source_name(LogitsSource source) {
  return source == LogitsSource::kGenerated ? "generated" : "gate";
}

Result<LogitsSource> parse_logits_source(std::string_view field, std::string_view name) {
  if (name == "generated") return LogitsSource::kGenerated;
  if (name == "gate") return LogitsSource::kGate;
  return invalid_argument(field, "must be one of {{generated, gate}}, got \"{}\"", name);
}

namespace {

template <typename T>
Status check_range(std::string_view field, T value, T lo, T hi) {
  if (value < lo || value > hi) return out_of_range(field, lo, hi, value);
  return Status();
}

Status validate_shapes(const MoeLayerConfig& c) {
  EPS_RETURN_IF_ERROR(check_range<std::int64_t>("layer", c.layer, 0, data::kMaxLayer));
  EPS_RETURN_IF_ERROR(check_range("hidden", c.hidden, 1, kMaxExpertDim));
  EPS_RETURN_IF_ERROR(check_range("ffn", c.ffn, 1, kMaxExpertDim));
  EPS_RETURN_IF_ERROR(check_range("num_experts", c.num_experts, 1, kMaxLayerExperts));
  EPS_RETURN_IF_ERROR(check_range("shared_experts", c.num_shared, 0, kMaxSharedExperts));
  if (c.num_shared > 0) EPS_RETURN_IF_ERROR(check_range("shared_ffn", c.shared_ffn, 1, kMaxExpertDim));
  EPS_RETURN_IF_ERROR(check_range<std::int64_t>("seq_len", c.seq_len, 1, kMaxLayerTokens));
  EPS_RETURN_IF_ERROR(
      check_range<std::int64_t>("num_samples", c.num_samples, 1, kMaxLayerTokens / c.seq_len));
  return Status();
}

Status validate_routing_groups(const MoeLayerConfig& c) {
  std::int64_t total = 0;
  for (std::size_t g = 0; g < c.routing_groups.size(); ++g) {
    const std::int64_t n = c.routing_groups[g];
    const std::string field = fmt::format("routing_groups[{}]", g);
    if (n < 0 || n > c.num_tokens()) return out_of_range(field, std::int64_t{0}, c.num_tokens(), n);
    if (n % c.seq_len != 0)
      return invalid_argument(field, "{} tokens is not a multiple of seq_len {}", n, c.seq_len);
    total += n;
  }
  if (!c.routing_groups.empty() && total != c.num_tokens()) {
    return invalid_argument("routing_groups", "the groups hold {} tokens, expected T = {}", total,
                            c.num_tokens());
  }
  return Status();
}

// Step 2: one routing of all tokens, or one per routing group, joined.
Result<routing::Routing> route_layer(const MoeLayerConfig& c, std::span<const float> logits) {
  if (c.routing_groups.empty()) {
    return routing::route(c.router, {logits, c.num_tokens(), c.num_experts, c.seq_len, c.mask_ratio});
  }
  std::vector<routing::Routing> parts;
  std::int64_t first = 0;
  for (const std::int64_t n : c.routing_groups) {
    if (n == 0) continue;
    const std::span<const float> ratios =
        c.mask_ratio.empty() ? std::span<const float>()
                             : std::span<const float>(c.mask_ratio).subspan(first / c.seq_len, n / c.seq_len);
    const routing::RoutingInput part{logits.subspan(first * c.num_experts, n * c.num_experts), n,
                                     c.num_experts, c.seq_len, ratios};
    EPS_ASSIGN_OR_RETURN(routing::Routing routed, routing::route(c.router, part));
    parts.push_back(std::move(routed));
    first += n;
  }
  return routing::join_routings(parts);
}

// Step 3's expert input: x, or x after the fp8 round trip (kRoundScale scales are powers of two, so every
// dequantized value, a 4-bit significand times 2^k, is a bf16).
Result<std::vector<bf16>> routed_expert_input(const MoeLayerConfig& c, std::span<const bf16> x) {
  if (c.dispatch_dtype == dispatch::PayloadType::kBf16) return std::vector<bf16>(x.begin(), x.end());
  const int tokens = static_cast<int>(c.num_tokens());
  EPS_ASSIGN_OR_RETURN(Fp8Batch batch,
                       quantize_fp8_per_token(x, tokens, c.hidden, Fp8ScaleMode::kRoundScale));
  EPS_ASSIGN_OR_RETURN(std::vector<float> values, dequantize_fp8_per_token(batch));
  std::vector<bf16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = bf16::from_float(values[i]);
  return out;
}

// Token lists per expert, ascending token order, with the global slot index each row belongs to.
struct ExpertRows {
  std::vector<std::int64_t> token;
  std::vector<std::int64_t> slot;
};

std::vector<ExpertRows> rows_per_expert(const routing::Routing& r) {
  std::vector<ExpertRows> rows(static_cast<std::size_t>(r.num_experts));
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    for (std::int64_t s = r.slot_begin[t]; s < r.slot_begin[t + 1]; ++s) {
      const std::int32_t e = r.slot_expert[s];
      if (e < 0) continue;
      rows[e].token.push_back(t);
      rows[e].slot.push_back(s);
    }
  }
  return rows;
}

std::vector<bf16> gather_rows(std::span<const bf16> x, std::span<const std::int64_t> tokens, int hidden) {
  std::vector<bf16> batch(tokens.size() * hidden);
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    std::copy_n(x.begin() + tokens[k] * hidden, hidden, batch.begin() + k * hidden);
  }
  return batch;
}

// y_slot [num_slots, H]: the bf16 output of every valid slot's expert for that slot's token.
Status run_routed_experts(const MoeLayerConfig& c, std::span<const bf16> x, const routing::Routing& r,
                          std::vector<bf16>& y_slot, MoeLayerResult& result) {
  const std::vector<ExpertRows> rows = rows_per_expert(r);
  for (int e = 0; e < c.num_experts; ++e) {
    if (rows[e].token.empty()) continue;
    EPS_ASSIGN_OR_RETURN(ExpertWeights w,
                         generate_expert_weights(c.seed, c.layer, ExpertRole::kRouted,
                                                 static_cast<std::uint32_t>(e), {c.hidden, c.ffn}));
    EPS_ASSIGN_OR_RETURN(Expert expert, Expert::create(std::move(w), c.kernel));
    const std::vector<bf16> batch = gather_rows(x, rows[e].token, c.hidden);
    std::vector<bf16> y(batch.size());
    EPS_RETURN_IF_ERROR(expert.forward(batch, ExpertOutputs{y}));
    for (std::size_t k = 0; k < rows[e].slot.size(); ++k) {
      std::copy_n(y.begin() + k * c.hidden, c.hidden, y_slot.begin() + rows[e].slot[k] * c.hidden);
    }
    result.expert_rows += static_cast<std::int64_t>(rows[e].token.size());
    ++result.experts_used;
  }
  return Status();
}

void combine_all(const MoeLayerConfig& c, const routing::Routing& r, std::span<const bf16> y_slot,
                 std::span<const int> expert_rank, std::vector<bf16>& routed) {
  const std::size_t h = static_cast<std::size_t>(c.hidden);
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    const std::int64_t begin = r.slot_begin[t];
    const std::size_t n = static_cast<std::size_t>(r.slot_begin[t + 1] - begin);
    combine_token(c.combine, std::span(r.slot_expert).subspan(begin, n),
                  std::span(r.slot_gate).subspan(begin, n), y_slot.subspan(begin * h, n * h), c.hidden,
                  expert_rank, std::span(routed).subspan(t * h, h));
  }
}

// out = bf16(fp32(routed) + Σ_{s ascending} fp32(shared_s)), see moe_layer.hpp step 5.
Status add_shared_experts(const MoeLayerConfig& c, std::span<const bf16> x, MoeLayerResult& result) {
  if (c.num_shared == 0) {
    result.out = result.routed;
    return Status();
  }
  std::vector<float> acc(result.routed.size());
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = result.routed[i].to_float();
  std::vector<bf16> y(x.size());
  for (int s = 0; s < c.num_shared; ++s) {
    EPS_ASSIGN_OR_RETURN(ExpertWeights w,
                         generate_expert_weights(c.seed, c.layer, ExpertRole::kShared,
                                                 static_cast<std::uint32_t>(s), {c.hidden, c.shared_ffn}));
    EPS_ASSIGN_OR_RETURN(Expert expert, Expert::create(std::move(w), c.kernel));
    EPS_RETURN_IF_ERROR(expert.forward(x, ExpertOutputs{y}));
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = acc[i] + y[i].to_float();
    result.shared_rows += c.num_tokens();
  }
  result.out.resize(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) result.out[i] = bf16::from_float(acc[i]);
  return Status();
}

}  // namespace

Status validate_moe_layer_config(const MoeLayerConfig& c) {
  EPS_RETURN_IF_ERROR(validate_shapes(c));
  EPS_RETURN_IF_ERROR(routing::validate_router(c.router, c.num_experts, "router."));
  if (!c.mask_ratio.empty() && static_cast<std::int64_t>(c.mask_ratio.size()) != c.num_samples) {
    return invalid_argument("mask_ratio", "expected num_samples = {} values, got {}", c.num_samples,
                            c.mask_ratio.size());
  }
  EPS_RETURN_IF_ERROR(validate_routing_groups(c));
  if (c.dispatch_dtype == dispatch::PayloadType::kFp8 && c.hidden % kFp8GroupSize != 0) {
    return invalid_argument("dispatch_dtype", "fp8 needs hidden to be a multiple of {}, got {}",
                            kFp8GroupSize, c.hidden);
  }
  if (c.combine == CombineTree::kHtTwoLevel) {
    return invalid_argument("combine", "the layer reference evaluates ll-weighted and ht-rank, got {}",
                            combine_tree_name(c.combine));
  }
  if (c.combine == CombineTree::kHtRank) {
    EPS_RETURN_IF_ERROR(check_range("num_ranks", c.num_ranks, 1, kMaxLayerExperts));
    EPS_RETURN_IF_ERROR(resolve_expert_rank(c.num_experts, c.num_ranks, c.expert_rank).status());
  }
  return Status();
}

Result<std::vector<float>> gate_logits(std::span<const bf16> x, std::span<const bf16> gate, int hidden) {
  if (hidden < 1) return out_of_range("hidden", 1, kMaxExpertDim, hidden);
  const auto h = static_cast<std::size_t>(hidden);
  if (x.size() % h != 0)
    return invalid_argument("x", "expected a multiple of H = {} values, got {}", h, x.size());
  if (gate.size() % h != 0 || gate.empty()) {
    return invalid_argument("gate", "expected E x H values with H = {}, got {}", h, gate.size());
  }
  const std::size_t tokens = x.size() / h, experts = gate.size() / h;
  std::vector<float> logits(tokens * experts);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t e = 0; e < experts; ++e) {
      float sum = 0.0f;
      for (std::size_t i = 0; i < h; ++i) sum = sum + x[t * h + i].to_float() * gate[e * h + i].to_float();
      logits[t * experts + e] = sum;
    }
  }
  return logits;
}

Result<MoeLayerInputs> generate_moe_layer_inputs(const MoeLayerConfig& c) {
  EPS_RETURN_IF_ERROR(validate_shapes(c));
  const auto tokens = static_cast<std::uint64_t>(c.num_tokens());
  const auto hidden = static_cast<std::uint32_t>(c.hidden);
  const auto experts = static_cast<std::uint32_t>(c.num_experts);
  MoeLayerInputs in;
  in.x.resize(tokens * hidden);
  EPS_RETURN_IF_ERROR(data::fill_payload(c.seed, 0, 0, tokens, hidden, in.x));
  if (c.logits == LogitsSource::kGenerated) {
    in.logits.resize(tokens * experts);
    EPS_RETURN_IF_ERROR(data::fill_router_logits(c.seed, c.layer, 0, 0, tokens, experts, in.logits));
    return in;
  }
  std::vector<bf16> gate(static_cast<std::size_t>(experts) * hidden);
  EPS_RETURN_IF_ERROR(
      data::fill_expert_weight(c.seed, c.layer, data::WeightMatrix::kGate, 0, experts, hidden, gate));
  EPS_ASSIGN_OR_RETURN(in.logits, gate_logits(in.x, gate, c.hidden));
  return in;
}

Result<MoeLayerResult> run_moe_layer(const MoeLayerConfig& c, const MoeLayerInputs& inputs) {
  EPS_RETURN_IF_ERROR(validate_moe_layer_config(c));
  const auto tokens = static_cast<std::size_t>(c.num_tokens());
  const auto h = static_cast<std::size_t>(c.hidden);
  if (inputs.x.size() != tokens * h) {
    return invalid_argument("x", "expected T x H = {} x {} values, got {}", tokens, h, inputs.x.size());
  }
  MoeLayerResult result;
  if (inputs.routing) {
    if (inputs.routing->num_tokens != c.num_tokens() || inputs.routing->num_experts != c.num_experts) {
      return invalid_argument("routing", "the given routing has T = {}, E = {}; the layer has T = {}, E = {}",
                              inputs.routing->num_tokens, inputs.routing->num_experts, c.num_tokens(),
                              c.num_experts);
    }
    result.routing = *inputs.routing;
  } else {
    EPS_ASSIGN_OR_RETURN(result.routing, route_layer(c, inputs.logits));
  }
  if (c.combine == CombineTree::kHtRank) {
    EPS_ASSIGN_OR_RETURN(result.expert_rank, resolve_expert_rank(c.num_experts, c.num_ranks, c.expert_rank));
  }
  std::vector<bf16> y_slot(result.routing.slot_expert.size() * h);
  EPS_ASSIGN_OR_RETURN(const std::vector<bf16> routed_x, routed_expert_input(c, inputs.x));
  EPS_RETURN_IF_ERROR(run_routed_experts(c, routed_x, result.routing, y_slot, result));
  result.routed.resize(tokens * h);
  combine_all(c, result.routing, y_slot, result.expert_rank, result.routed);
  EPS_RETURN_IF_ERROR(add_shared_experts(c, inputs.x, result));
  return result;
}

Result<MoeLayerResult> run_moe_layer(const MoeLayerConfig& config) {
  EPS_ASSIGN_OR_RETURN(MoeLayerInputs inputs, generate_moe_layer_inputs(config));
  return run_moe_layer(config, inputs);
}

}  // namespace eps
