// The op-specific fields of a results case (docs/results.md 9.1 and 9.6): what an operation writes into a
// case beside the fields every case has (CaseResult::extra), named once here for the C++ code that writes and
// reads them, and declared, with their types, in the schema (results/schema/results-v1.schema.json,
// `$defs/<op>_fields`), which is the one list. The schema is built into the library (`results_schema_text`).
//
// `check_op_fields` holds a case's extra fields against the schema's declaration for its op: every key must
// be declared there (an op without `<op>_fields` declares none), must not be a field every case has, and its
// value must have the declared shape. The schema constructs it understands are those the declarations use:
// `type` (one or a list of object, array, string, number, integer, boolean, null), `properties`, `required`,
// `additionalProperties` (a schema or false), `items`, `minimum`, `maximum`, `minLength`, `enum`, `const`,
// `$ref` to
// `#/$defs/NAME`, and `description`; any other keyword in a declaration is reported as unsupported. The
// writer (results/document.hpp case_to_json) refuses a case that fails it as a programming error
// (std::logic_error).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"

namespace eps {

// The schema text, as built from results/schema/results-v1.schema.json.
std::string_view results_schema_text();
// The schema, parsed once.
const Json& results_schema();

// OK, or kInvalidArgument naming the field ("extra.tokens_per_s: ...") and what is wrong.
Status check_op_fields(std::string_view op, const Json& extra);

namespace op_field {

// `epsuite bench layer` (op "layer", perf/bench/op_layer.cpp; docs/layer.md 4.4).
inline constexpr const char* kPhasesUs = "phases_us";  // {route, dispatch, expert, combine, shared}: µs
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kExpertGflopsPerRank = "expert_gflops_per_rank";
inline constexpr const char* kMaskRatio = "mask_ratio";
inline constexpr const char* kExpertLoad = "expert_load";  // [layer][expert], also of op "eplb"
inline constexpr const char* kDroppedPairs = "dropped_pairs";
inline constexpr const char* kDroppedTokens = "dropped_tokens";
inline constexpr const char* kBalancedness = "balancedness";  // layer: [layer] β; eplb: {predicted, realized}
inline constexpr const char* kBalancednessAggregate = "balancedness_aggregate";
inline constexpr const char* kExpertRows = "expert_rows";
inline constexpr const char* kComputeCost = "compute_cost";
inline constexpr const char* kStaticCost = "static_cost";

// `epsuite bench eplb` (op "eplb", perf/bench/op_eplb.cpp; docs/eplb.md 8.5-8.6).
inline constexpr const char* kPolicy = "policy";
inline constexpr const char* kWindow = "window";
inline constexpr const char* kFirstStep = "first_step";
inline constexpr const char* kLastStep = "last_step";
inline constexpr const char* kPlan = "plan";
inline constexpr const char* kPredicted = "predicted";  // in balancedness, balancedness_per_layer, rebalances
inline constexpr const char* kRealized = "realized";    // in balancedness, balancedness_per_layer
inline constexpr const char* kBalancednessPerLayer = "balancedness_per_layer";
inline constexpr const char* kBalancednessRows = "balancedness_rows";
inline constexpr const char* kBoundaryUs = "boundary_us";
inline constexpr const char* kSwitches = "switches";
inline constexpr const char* kMovedExperts = "moved_experts";  // {same_rank, same_node, cross_node}
inline constexpr const char* kMovedBytes = "moved_bytes";      // {same_rank, same_node, cross_node}
inline constexpr const char* kPlannerUs = "planner_us";
inline constexpr const char* kStallUs = "stall_us";
inline constexpr const char* kRebalances = "rebalances";

}  // namespace op_field

// The fields of a `bench layer` case, typed; to_json gives them under the names above.
inline constexpr std::array<const char*, 5> kLayerPhases = {"route", "dispatch", "expert", "combine",
                                                            "shared"};
struct LayerFields {
  std::array<double, kLayerPhases.size()> phases_us{};  // in kLayerPhases order
  double tokens_per_s = 0;
  double expert_gflops_per_rank = 0;
  double mask_ratio = 0;
  std::vector<std::vector<std::int64_t>> expert_load;  // [layer][expert]
  std::vector<std::int64_t> dropped_pairs;             // [layer]
  std::vector<std::int64_t> dropped_tokens;            // [layer]
  std::vector<double> balancedness;                    // [layer]
  double balancedness_aggregate = 1;
  std::vector<std::int64_t> expert_rows;   // [rank]
  std::vector<std::int64_t> compute_cost;  // [layer]
  std::vector<std::int64_t> static_cost;   // [layer]
};
Json to_json(const LayerFields& fields);

// Per class of move (docs/eplb.md 8.5).
struct MoveClasses {
  double same_rank = 0;
  double same_node = 0;
  double cross_node = 0;
};
struct RebalanceFields {
  std::uint64_t request = 0;
  std::int64_t requested_after_step = -1;
  std::int64_t adopted_after_step = -1;
  std::int64_t staged_after_step = -1;
  std::int64_t switch_step = -1;
  double planner_us = 0;
  double stall_us = 0;
  double predicted = 0;
  MoveClasses moved_experts;
  MoveClasses moved_bytes;
};
// The fields of a `bench eplb` case (one load window), typed; to_json gives them under the names above.
struct EplbWindowFields {
  std::string policy;
  int window = 0;
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::uint64_t plan = 0;
  double predicted = 0;  // balancedness.predicted
  double realized = 0;   // balancedness.realized
  std::vector<double> predicted_per_layer;
  std::vector<double> realized_per_layer;
  double balancedness_rows = 1;
  std::vector<double> boundary_us;  // [step]
  std::int64_t switches = 0;
  MoveClasses moved_experts;
  MoveClasses moved_bytes;
  double planner_us = 0;
  double stall_us = 0;
  std::vector<RebalanceFields> rebalances;
  std::vector<std::vector<double>> expert_load;  // [layer][expert]
};
Json to_json(const EplbWindowFields& fields);

}  // namespace eps
