#include "harness/ref/ref_layer.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "harness/ref/ref_route.hpp"
#include "reference/data/values.hpp"
#include "reference/layer/moe_layer.hpp"

namespace eps {
namespace {

const std::vector<std::string> kInputKeys = {"seed",        "layer",          "hidden",      "ffn",
                                             "num_experts", "shared_experts", "shared_ffn",  "seq_len",
                                             "num_samples", "router",         "mask_ratio",  "logits",
                                             "combine",     "num_ranks",      "expert_rank", "kernel"};

template <typename T>
Result<T> narrow_integer(const JsonFields& f, std::string_view key, std::int64_t lo, std::int64_t hi,
                         std::optional<std::int64_t> fallback = std::nullopt) {
  EPS_ASSIGN_OR_RETURN(const std::int64_t v, f.integer(key, lo, hi, fallback));
  return static_cast<T>(v);
}

Result<std::vector<int>> parse_int_array(const JsonFields& f, std::string_view key) {
  if (!f.has(key)) return std::vector<int>();
  EPS_ASSIGN_OR_RETURN(const Json* array, f.member(key));
  if (!array->is_array()) return invalid_argument(f.field(key), "expected an array of integers");
  std::vector<int> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const Json& v = (*array)[i];
    if (!v.is_number_integer()) {
      return invalid_argument(fmt::format("{}[{}]", f.field(key), i), "expected an integer, got {}",
                              v.dump());
    }
    out.push_back(v.get<int>());
  }
  return out;
}

Status parse_shapes(const JsonFields& f, MoeLayerConfig& c) {
  EPS_ASSIGN_OR_RETURN(c.seed, narrow_integer<std::uint64_t>(f, "seed", 0, std::int64_t{1} << 53, 0));
  EPS_ASSIGN_OR_RETURN(c.layer, narrow_integer<std::uint32_t>(f, "layer", 0, data::kMaxLayer, 0));
  EPS_ASSIGN_OR_RETURN(c.hidden, narrow_integer<int>(f, "hidden", 1, kMaxExpertDim));
  EPS_ASSIGN_OR_RETURN(c.ffn, narrow_integer<int>(f, "ffn", 1, kMaxExpertDim));
  EPS_ASSIGN_OR_RETURN(c.num_experts, narrow_integer<int>(f, "num_experts", 1, kMaxLayerExperts));
  EPS_ASSIGN_OR_RETURN(c.num_shared, narrow_integer<int>(f, "shared_experts", 0, kMaxSharedExperts, 0));
  if (c.num_shared > 0) {
    EPS_ASSIGN_OR_RETURN(c.shared_ffn, narrow_integer<int>(f, "shared_ffn", 1, kMaxExpertDim));
  } else if (f.has("shared_ffn")) {
    return invalid_argument("shared_ffn", "only allowed with shared_experts >= 1");
  }
  EPS_ASSIGN_OR_RETURN(c.seq_len, f.integer("seq_len", 1, kMaxLayerTokens));
  EPS_ASSIGN_OR_RETURN(c.num_samples, f.integer("num_samples", 1, kMaxLayerTokens / c.seq_len, 1));
  return Status();
}

Status parse_combine(const JsonFields& f, MoeLayerConfig& c) {
  EPS_ASSIGN_OR_RETURN(const std::string tree,
                       f.choice("combine", {"ll-weighted", "ht-rank"}, "ll-weighted"));
  EPS_ASSIGN_OR_RETURN(c.combine, parse_combine_tree("combine", tree));
  if (c.combine == CombineTree::kLlWeighted) {
    for (const char* key : {"num_ranks", "expert_rank"}) {
      if (f.has(key)) return invalid_argument(key, "only allowed with combine \"ht-rank\"");
    }
    return Status();
  }
  EPS_ASSIGN_OR_RETURN(c.num_ranks, narrow_integer<int>(f, "num_ranks", 1, kMaxLayerExperts, 1));
  EPS_ASSIGN_OR_RETURN(c.expert_rank, parse_int_array(f, "expert_rank"));
  return Status();
}

// One string per token: its bf16 values as 4 lowercase hex digits each, concatenated.
Json hex_rows(const std::vector<bf16>& values, int hidden) {
  Json rows = Json::array();
  std::string row;
  for (std::size_t t = 0; t * hidden < values.size(); ++t) {
    row.clear();
    for (int h = 0; h < hidden; ++h) row += fmt::format("{:04x}", values[t * hidden + h].bits);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

Result<MoeLayerConfig> parse_layer_config(const Json& input) {
  const JsonFields f(input, "");
  EPS_RETURN_IF_ERROR(f.expect_object());
  EPS_RETURN_IF_ERROR(JsonFields(input, "").only_known(kInputKeys, "the layer input"));
  MoeLayerConfig c;
  EPS_RETURN_IF_ERROR(parse_shapes(f, c));
  EPS_ASSIGN_OR_RETURN(const Json* router, f.member("router"));
  EPS_ASSIGN_OR_RETURN(c.router, parse_router_json(*router, c.num_experts));
  if (f.has("mask_ratio")) {
    EPS_ASSIGN_OR_RETURN(const Json* ratios, f.member("mask_ratio"));
    EPS_ASSIGN_OR_RETURN(c.mask_ratio, json_float_array(*ratios, "mask_ratio", false));
  }
  EPS_ASSIGN_OR_RETURN(const std::string logits, f.choice("logits", {"generated", "gate"}, "generated"));
  EPS_ASSIGN_OR_RETURN(c.logits, parse_logits_source("logits", logits));
  EPS_RETURN_IF_ERROR(parse_combine(f, c));
  EPS_ASSIGN_OR_RETURN(const std::string kernel, f.choice("kernel", {"scalar", "vectorized"}, "scalar"));
  EPS_ASSIGN_OR_RETURN(c.kernel, parse_expert_kernel("kernel", kernel));
  EPS_RETURN_IF_ERROR(validate_moe_layer_config(c));
  return c;
}

Result<Json> run_ref_layer(const Json& input) {
  EPS_ASSIGN_OR_RETURN(const MoeLayerConfig c, parse_layer_config(input));
  EPS_ASSIGN_OR_RETURN(const MoeLayerResult r, run_moe_layer(c));
  Json out;
  out["kernel"] = std::string(expert_kernel_name(c.kernel));
  if (c.kernel == ExpertKernelKind::kVectorized)
    out["simd_path"] = std::string(simd_path_name(best_simd_path()));
  out["combine"] = std::string(combine_tree_name(c.combine));
  if (c.combine == CombineTree::kHtRank) {
    out["num_ranks"] = c.num_ranks;
    out["expert_rank"] = r.expert_rank;
  }
  out["logits"] = std::string(logits_source_name(c.logits));
  out["num_tokens"] = c.num_tokens();
  out["hidden"] = c.hidden;
  out["out"] = hex_rows(r.out, c.hidden);
  out["routed"] = hex_rows(r.routed, c.hidden);
  out["routing"] = routing_to_json(r.routing);
  out["expert_rows"] = r.expert_rows;
  out["experts_used"] = r.experts_used;
  out["shared_rows"] = r.shared_rows;
  return out;
}

}  // namespace eps
