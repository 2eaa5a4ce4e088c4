#include "harness/ref/ref_route.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

namespace eps {
namespace {

using routing::CapacityFormula;
using routing::ExpertChoiceConfig;
using routing::ScoreFunction;
using routing::TokenChoiceConfig;

const std::vector<std::string> kTokenChoiceKeys = {
    "type", "k", "score", "renorm", "bias", "groups", "topk_groups", "scaling", "capacity", "cf", "drop"};
const std::vector<std::string> kExpertChoiceKeys = {"type",  "k",     "scope", "gate",  "schedule",
                                                    "k_min", "k_max", "sigma", "fscale"};
const std::vector<std::string> kExpertChoiceSoftmaxKeys = {"type",  "k",     "scope", "schedule",
                                                           "k_min", "k_max", "sigma"};
const std::vector<std::string> kInputKeys = {"router", "seq_len", "logits", "mask_ratio"};

// A field that only some settings use must be absent otherwise.
Status reject_unused(const JsonFields& fields, std::string_view key, std::string_view reason) {
  if (fields.has(key)) return invalid_argument(fields.field(key), "{}", reason);
  return Status();
}

Result<std::vector<float>> optional_floats(const JsonFields& fields, std::string_view key) {
  if (!fields.has(key)) return std::vector<float>();
  EPS_ASSIGN_OR_RETURN(const Json* value, fields.member(key));
  return json_float_array(*value, fields.field(key), /*allow_infinity=*/false);
}

ScoreFunction score_of(const std::string& name) {
  return name == "sigmoid" ? ScoreFunction::kSigmoid : ScoreFunction::kSoftmax;
}

Result<TokenChoiceConfig> parse_token_choice(const JsonFields& f, std::int64_t e) {
  TokenChoiceConfig c;
  EPS_ASSIGN_OR_RETURN(const std::string score, f.choice("score", {"softmax", "sigmoid"}, "softmax"));
  c.score = score_of(score);
  EPS_ASSIGN_OR_RETURN(c.k, f.integer("k", 1, e));
  EPS_ASSIGN_OR_RETURN(c.renorm, f.boolean("renorm", false));
  EPS_ASSIGN_OR_RETURN(c.bias, optional_floats(f, "bias"));
  EPS_ASSIGN_OR_RETURN(c.groups, f.integer("groups", 1, e, 1));
  EPS_ASSIGN_OR_RETURN(c.topk_groups, f.integer("topk_groups", 1, c.groups, 1));
  EPS_ASSIGN_OR_RETURN(const double scaling, f.number("scaling", 0.0, 1e6, 1.0));
  c.scaling = static_cast<float>(scaling);
  EPS_ASSIGN_OR_RETURN(const std::string capacity,
                       f.choice("capacity", {"dropless", "megatron", "gshard"}, "dropless"));
  if (capacity == "dropless") {
    c.capacity = CapacityFormula::kDropless;
    EPS_RETURN_IF_ERROR(reject_unused(f, "cf", "only used with capacity megatron or gshard"));
    EPS_RETURN_IF_ERROR(reject_unused(f, "drop", "only used with capacity megatron or gshard"));
    return c;
  }
  c.capacity = capacity == "megatron" ? CapacityFormula::kMegatron : CapacityFormula::kGshard;
  EPS_ASSIGN_OR_RETURN(c.capacity_factor, f.number("cf", 0.0, 1e6, 1.0));
  EPS_ASSIGN_OR_RETURN(const std::string drop, f.choice("drop", {"position", "probs"}, "position"));
  c.drop = drop == "probs" ? routing::DropPriority::kProbs : routing::DropPriority::kPosition;
  return c;
}

Status parse_schedule_fields(const JsonFields& f, std::int64_t e, routing::KSchedule& k) {
  EPS_ASSIGN_OR_RETURN(k.k, f.integer("k", 1, e));
  EPS_ASSIGN_OR_RETURN(const std::string text, f.string("schedule", "static"));
  EPS_ASSIGN_OR_RETURN(k.schedule, routing::parse_schedule(text, f.field("schedule")));
  if (k.schedule.kind == routing::ScheduleKind::kStatic) {
    EPS_RETURN_IF_ERROR(reject_unused(f, "k_min", "only used with a non-static schedule"));
    EPS_RETURN_IF_ERROR(reject_unused(f, "k_max", "only used with a non-static schedule"));
  } else {
    EPS_ASSIGN_OR_RETURN(k.k_min, f.integer("k_min", 1, e));
    EPS_ASSIGN_OR_RETURN(k.k_max, f.integer("k_max", 1, e));
  }
  if (!routing::schedule_needs_sigma(k.schedule.kind)) {
    return reject_unused(f, "sigma", "only used with schedules bell_gaussian and bell_gaussian_reverse");
  }
  if (f.has("sigma")) {
    if (k.schedule.sigma != 0.0f) {
      return invalid_argument(f.field("sigma"), "given twice (also as the \":sigma\" suffix of {})",
                              f.field("schedule"));
    }
    EPS_ASSIGN_OR_RETURN(const double sigma, f.number("sigma", 1e-6, 1e6));
    k.schedule.sigma = static_cast<float>(sigma);
  }
  return Status();
}

Result<ExpertChoiceConfig> parse_expert_choice(const JsonFields& f, const std::string& type, std::int64_t e) {
  ExpertChoiceConfig c;
  c.variant = type == "ec" ? routing::ExpertChoiceVariant::kDlm : routing::ExpertChoiceVariant::kSoftmax;
  EPS_ASSIGN_OR_RETURN(const std::string scope, f.choice("scope", {"sequence", "batch"}, "sequence"));
  c.scope = scope == "batch" ? routing::CapacityScope::kBatch : routing::CapacityScope::kSequence;
  if (type == "ec") {
    EPS_ASSIGN_OR_RETURN(const std::string gate, f.choice("gate", {"softmax", "sigmoid"}, "softmax"));
    c.gate = score_of(gate);
    EPS_ASSIGN_OR_RETURN(c.fscale, optional_floats(f, "fscale"));
  }
  EPS_RETURN_IF_ERROR(parse_schedule_fields(f, e, c.k_schedule));
  return c;
}

// The shortest decimal that reads back as the same float, so gates stay exact and readable.
Json json_float(float value) { return std::strtod(fmt::format("{}", value).c_str(), nullptr); }

Json optional_json(const std::optional<std::int64_t>& value) { return value ? Json(*value) : Json(nullptr); }

Result<std::vector<float>> parse_logits(const JsonFields& fields, std::int64_t& num_tokens,
                                        std::int64_t& num_experts) {
  EPS_ASSIGN_OR_RETURN(const Json* logits, fields.member("logits"));
  if (!logits->is_array() || logits->empty()) {
    return invalid_argument("logits", "expected a non-empty array of rows [T][E] (T >= 1)");
  }
  const Json& first = (*logits)[0];
  if (!first.is_array() || first.empty()) {
    return invalid_argument("logits[0]", "expected a non-empty array of E expert logits (E >= 1)");
  }
  EPS_ASSIGN_OR_RETURN(const auto rows, json_float_matrix(*logits, "logits", first.size(), true));
  num_tokens = static_cast<std::int64_t>(rows.size());
  num_experts = static_cast<std::int64_t>(first.size());
  std::vector<float> flat;
  flat.reserve(rows.size() * first.size());
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

}  // namespace

Result<routing::RouterConfig> parse_router_json(const Json& router, std::int64_t num_experts,
                                                const std::string& path) {
  const JsonFields f(router, path);
  EPS_RETURN_IF_ERROR(f.expect_object());
  EPS_ASSIGN_OR_RETURN(const std::string type, f.choice("type", {"tc", "ec", "ec-softmax"}));
  const std::string owner = fmt::format("{} type {}", path, type);
  routing::RouterConfig config;
  if (type == "tc") {
    EPS_RETURN_IF_ERROR(JsonFields(router, path).only_known(kTokenChoiceKeys, owner));
    EPS_ASSIGN_OR_RETURN(config, parse_token_choice(f, num_experts));
  } else {
    EPS_RETURN_IF_ERROR(JsonFields(router, path)
                            .only_known(type == "ec" ? kExpertChoiceKeys : kExpertChoiceSoftmaxKeys, owner));
    EPS_ASSIGN_OR_RETURN(config, parse_expert_choice(f, type, num_experts));
  }
  EPS_RETURN_IF_ERROR(routing::validate_router(config, num_experts, path + "."));
  return config;
}

Json routing_to_json(const routing::Routing& r) {
  Json tokens = Json::array();
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    Json gates = Json::array();
    for (float g : r.gates(t)) gates.push_back(json_float(g));
    const auto experts = r.experts(t);
    tokens.push_back(
        {{"experts", std::vector<std::int32_t>(experts.begin(), experts.end())}, {"gates", gates}});
  }
  Json out;
  out["tokens"] = std::move(tokens);
  out["k_per_sample"] = r.k_per_sample;
  out["capacity_per_sample"] = r.capacity_per_sample;
  out["capacity"] = optional_json(r.capacity);
  out["expert_load"] = r.expert_load;
  out["dropped_tokens"] = r.dropped_tokens;
  out["dropped_assignments"] = r.dropped_assignments;
  out["drop_ratio"] = r.drop_ratio;
  out["padding_waste"] = r.padding_waste ? Json(*r.padding_waste) : Json(nullptr);
  out["compute_cost"] = r.compute_cost;
  out["static_cost"] = r.static_cost;
  return out;
}

Result<Json> run_ref_route(const Json& input) {
  const JsonFields fields(input, "");
  EPS_RETURN_IF_ERROR(fields.expect_object());
  EPS_RETURN_IF_ERROR(JsonFields(input, "").only_known(kInputKeys, "the route input"));
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  EPS_ASSIGN_OR_RETURN(const std::vector<float> logits, parse_logits(fields, num_tokens, num_experts));
  EPS_ASSIGN_OR_RETURN(const Json* router, fields.member("router"));
  EPS_ASSIGN_OR_RETURN(const routing::RouterConfig config, parse_router_json(*router, num_experts));
  EPS_ASSIGN_OR_RETURN(const std::int64_t seq_len, fields.integer("seq_len", 1, num_tokens, num_tokens));
  EPS_ASSIGN_OR_RETURN(const std::vector<float> mask_ratio, optional_floats(fields, "mask_ratio"));
  routing::RoutingInput in;
  in.logits = logits;
  in.num_tokens = num_tokens;
  in.num_experts = num_experts;
  in.seq_len = seq_len;
  in.mask_ratio = mask_ratio;
  EPS_ASSIGN_OR_RETURN(const routing::Routing result, routing::route(config, in));
  return routing_to_json(result);
}

}  // namespace eps
