#include "results/op_fields.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace eps {
namespace {

constexpr std::array<std::string_view, 13> kKeywords = {
    "type",  "properties", "required", "additionalProperties", "items", "minimum", "maximum", "enum",
    "const", "minLength",  "$ref",     "description",          "title"};

bool has_type(const Json& value, std::string_view type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

const Json& resolve(const Json& schema) {
  if (!schema.contains("$ref")) return schema;
  const std::string ref = schema.at("$ref").get<std::string>();
  constexpr std::string_view kDefs = "#/$defs/";
  const Json& defs = results_schema().at("$defs");
  if (!ref.starts_with(kDefs) || !defs.contains(ref.substr(kDefs.size()))) {
    throw std::logic_error(fmt::format("results schema: unsupported $ref '{}'", ref));
  }
  return defs.at(ref.substr(kDefs.size()));
}

Status check_value(const Json& value, const Json& declared, const std::string& where);

Status check_type(const Json& value, const Json& schema, const std::string& where) {
  if (!schema.contains("type")) return Status();
  const Json& type = schema.at("type");
  const std::vector<std::string> types = type.is_array() ? type.get<std::vector<std::string>>()
                                                         : std::vector<std::string>{type.get<std::string>()};
  if (std::any_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(value, t); })) {
    return Status();
  }
  return invalid_argument(where, "must be of type {}, got {} {}", fmt::join(types, " or "), value.type_name(),
                          value.dump());
}

Status check_bounds(const Json& value, const Json& schema, const std::string& where) {
  if (schema.contains("minimum") && value.is_number() &&
      value.get<double>() < schema.at("minimum").get<double>())
    return invalid_argument(where, "must be >= {}, got {}", schema.at("minimum").dump(), value.dump());
  if (schema.contains("maximum") && value.is_number() &&
      value.get<double>() > schema.at("maximum").get<double>())
    return invalid_argument(where, "must be <= {}, got {}", schema.at("maximum").dump(), value.dump());
  if (schema.contains("minLength") && value.is_string() &&
      value.get<std::string>().size() < schema.at("minLength").get<std::size_t>())
    return invalid_argument(where, "must have at least {} characters, got {}", schema.at("minLength").dump(),
                            value.dump());
  if (schema.contains("const") && value != schema.at("const"))
    return invalid_argument(where, "must be {}, got {}", schema.at("const").dump(), value.dump());
  if (schema.contains("enum")) {
    const Json& allowed = schema.at("enum");
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
      return invalid_argument(where, "must be one of {}, got {}", allowed.dump(), value.dump());
  }
  return Status();
}

Status check_members(const Json& value, const Json& schema, const std::string& where) {
  if (!value.is_object()) return Status();
  for (const std::string& name : schema.value("required", std::vector<std::string>{})) {
    if (!value.contains(name))
      return invalid_argument(fmt::format("{}.{}", where, name), "required, missing");
  }
  const Json no_properties = Json::object();
  const Json& properties = schema.contains("properties") ? schema.at("properties") : no_properties;
  for (const auto& [name, member] : value.items()) {
    const std::string inner = fmt::format("{}.{}", where, name);
    if (properties.contains(name)) {
      EPS_RETURN_IF_ERROR(check_value(member, properties.at(name), inner));
    } else if (schema.contains("additionalProperties")) {
      const Json& others = schema.at("additionalProperties");
      if (others.is_boolean() && !others.get<bool>()) return invalid_argument(inner, "is not declared");
      if (others.is_object()) EPS_RETURN_IF_ERROR(check_value(member, others, inner));
    }
  }
  return Status();
}

Status check_value(const Json& value, const Json& declared, const std::string& where) {
  const Json& schema = resolve(declared);
  for (const auto& [keyword, ignored] : schema.items()) {
    if (std::find(kKeywords.begin(), kKeywords.end(), keyword) == kKeywords.end()) {
      throw std::logic_error(
          fmt::format("results schema: {} uses '{}', which check_op_fields does not know", where, keyword));
    }
  }
  EPS_RETURN_IF_ERROR(check_type(value, schema, where));
  EPS_RETURN_IF_ERROR(check_bounds(value, schema, where));
  EPS_RETURN_IF_ERROR(check_members(value, schema, where));
  if (value.is_array() && schema.contains("items")) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      EPS_RETURN_IF_ERROR(check_value(value[i], schema.at("items"), fmt::format("{}[{}]", where, i)));
    }
  }
  return Status();
}

}  // namespace

const Json& results_schema() {
  static const Json schema = Json::parse(results_schema_text());
  return schema;
}

Status check_op_fields(std::string_view op, const Json& extra) {
  if (extra.is_null()) return Status();  // none
  if (!extra.is_object()) return invalid_argument("extra", "must be an object, got {}", extra.type_name());
  const Json& defs = results_schema().at("$defs");
  const Json& common = defs.at("case").at("properties");
  const std::string name = fmt::format("{}_fields", op);
  const Json no_fields = Json{{"properties", Json::object()}};
  const Json& fields = defs.contains(name) ? defs.at(name) : no_fields;
  for (const auto& [key, value] : extra.items()) {
    const std::string where = fmt::format("extra.{}", key);
    if (common.contains(key)) return invalid_argument(where, "is a field every case has, not an op field");
    if (!fields.at("properties").contains(key)) {
      return invalid_argument(where,
                              "is not declared for op '{}' in results/schema/results-v1.schema.json "
                              "($defs/{}; docs/results.md 9.6)",
                              op, name);
    }
    EPS_RETURN_IF_ERROR(check_value(value, fields.at("properties").at(key), where));
  }
  return Status();
}

Json to_json(const LayerFields& f) {
  using namespace op_field;  // NOLINT: the names of this op's fields
  Json phases = Json::object();
  for (std::size_t i = 0; i < kLayerPhases.size(); ++i) phases[kLayerPhases[i]] = f.phases_us[i];
  return Json{{kPhasesUs, phases},
              {kTokensPerS, f.tokens_per_s},
              {kExpertGflopsPerRank, f.expert_gflops_per_rank},
              {kMaskRatio, f.mask_ratio},
              {kExpertLoad, f.expert_load},
              {kDroppedPairs, f.dropped_pairs},
              {kDroppedTokens, f.dropped_tokens},
              {kBalancedness, f.balancedness},
              {kBalancednessAggregate, f.balancedness_aggregate},
              {kExpertRows, f.expert_rows},
              {kComputeCost, f.compute_cost},
              {kStaticCost, f.static_cost}};
}

namespace {

Json moves_json(const MoveClasses& m) {
  return Json{{"same_rank", m.same_rank}, {"same_node", m.same_node}, {"cross_node", m.cross_node}};
}

}  // namespace

Json to_json(const EplbWindowFields& f) {
  using namespace op_field;  // NOLINT: the names of this op's fields
  Json rebalances = Json::array();
  for (const RebalanceFields& r : f.rebalances) {
    rebalances.push_back(Json{{"request", r.request},
                              {"requested_after_step", r.requested_after_step},
                              {"adopted_after_step", r.adopted_after_step},
                              {"staged_after_step", r.staged_after_step},
                              {"switch_step", r.switch_step},
                              {kPlannerUs, r.planner_us},
                              {kStallUs, r.stall_us},
                              {kPredicted, r.predicted},
                              {kMovedExperts, moves_json(r.moved_experts)},
                              {kMovedBytes, moves_json(r.moved_bytes)}});
  }
  return Json{
      {kPolicy, f.policy},
      {kWindow, f.window},
      {kFirstStep, f.first_step},
      {kLastStep, f.last_step},
      {kPlan, f.plan},
      {kBalancedness, {{kPredicted, f.predicted}, {kRealized, f.realized}}},
      {kBalancednessPerLayer, {{kPredicted, f.predicted_per_layer}, {kRealized, f.realized_per_layer}}},
      {kBalancednessRows, f.balancedness_rows},
      {kBoundaryUs, f.boundary_us},
      {kSwitches, f.switches},
      {kMovedExperts, moves_json(f.moved_experts)},
      {kMovedBytes, moves_json(f.moved_bytes)},
      {kPlannerUs, f.planner_us},
      {kStallUs, f.stall_us},
      {kRebalances, rebalances},
      {kExpertLoad, f.expert_load}};
}

}  // namespace eps
