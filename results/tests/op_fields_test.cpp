// The op-specific fields of a case (docs/results.md 9.6): the schema built into the library is the file's,
// every field name the C++ code writes is declared there, and the writer refuses, as a programming error, a
// case whose extra fields the schema does not declare for its op or whose values have the wrong shape.
#include "results/op_fields.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "results/document.hpp"

namespace eps {
namespace {

Json layer_fields() {
  using namespace op_field;  // NOLINT: the names under test
  return Json{
      {kPhasesUs, {{"route", 1.0}, {"dispatch", 2.0}, {"expert", 3.0}, {"combine", 4.0}, {"shared", 5.0}}},
      {kTokensPerS, 1000.0},
      {kExpertGflopsPerRank, 2.5},
      {kMaskRatio, 0.5},
      {kExpertLoad, {{3, 1}, {2, 2}}},
      {kDroppedPairs, {0, 1}},
      {kDroppedTokens, {0, 0}},
      {kBalancedness, {0.75, 1.0}},
      {kBalancednessAggregate, 0.8},
      {kExpertRows, {4, 4}},
      {kComputeCost, {8, 8}},
      {kStaticCost, {8, 8}}};
}

Json eplb_fields() {
  using namespace op_field;  // NOLINT
  const Json moves{{"same_rank", 1.0}, {"same_node", 2.0}, {"cross_node", 0.0}};
  return Json{{kPolicy, "deepseek"},
              {kWindow, 1},
              {kFirstStep, 2},
              {kLastStep, 3},
              {kPlan, 1},
              {kBalancedness, {{kPredicted, 0.9}, {kRealized, 0.8}}},
              {kBalancednessPerLayer, {{kPredicted, {0.9}}, {kRealized, {0.8}}}},
              {kBalancednessRows, 0.85},
              {kBoundaryUs, {10.0, 12.0}},
              {kSwitches, 1},
              {kMovedExperts, moves},
              {kMovedBytes, moves},
              {kPlannerUs, 3.5},
              {kStallUs, 7.0},
              {kRebalances,
               {{{"request", 1},
                 {"requested_after_step", 1},
                 {"adopted_after_step", 2},
                 {"staged_after_step", 2},
                 {"switch_step", 3},
                 {"planner_us", 3.5},
                 {"stall_us", 7.0},
                 {kPredicted, 0.9},
                 {kMovedExperts, moves},
                 {kMovedBytes, moves}}}},
              {kExpertLoad, {{3.0, 1.0}}}};
}

TEST(OpFields, TheBuiltInSchemaIsTheFile) {
  std::ifstream in(EPS_RESULTS_SCHEMA);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(results_schema_text(), text.str());
  EXPECT_EQ(results_schema().at("$defs").at("case").at("unevaluatedProperties"), false);
}

TEST(OpFields, EveryNameIsDeclaredForItsOpAndNoneIsACommonField) {
  const Json& defs = results_schema().at("$defs");
  for (const char* op : {"layer", "eplb"}) {
    for (const auto& [name, ignored] : defs.at(std::string(op) + "_fields").at("properties").items()) {
      EXPECT_FALSE(defs.at("case").at("properties").contains(name))
          << op << " declares common field " << name;
    }
  }
  EXPECT_TRUE(check_op_fields("layer", layer_fields()).ok())
      << check_op_fields("layer", layer_fields()).message();
  EXPECT_TRUE(check_op_fields("eplb", eplb_fields()).ok())
      << check_op_fields("eplb", eplb_fields()).message();
  EXPECT_TRUE(check_op_fields("dispatch", Json::object()).ok());
}

TEST(OpFields, RefusesUndeclaredKeysCommonFieldsAndWrongShapes) {
  Json undeclared = layer_fields();
  undeclared["tokens_per_second"] = 3.0;
  EXPECT_EQ(
      check_op_fields("layer", undeclared).message(),
      "extra.tokens_per_second: is not declared for op 'layer' in results/schema/results-v1.schema.json "
      "($defs/layer_fields; docs/results.md 9.6)");
  // A layer field is not a field of another op.
  EXPECT_EQ(check_op_fields("dispatch", Json{{op_field::kTokensPerS, 1.0}}).message(),
            "extra.tokens_per_s: is not declared for op 'dispatch' in results/schema/results-v1.schema.json "
            "($defs/dispatch_fields; docs/results.md 9.6)");
  EXPECT_EQ(check_op_fields("layer", Json{{"stats", 1}}).message(),
            "extra.stats: is a field every case has, not an op field");
  EXPECT_EQ(check_op_fields("layer", Json{{op_field::kTokensPerS, "fast"}}).message(),
            "extra.tokens_per_s: must be of type number, got string \"fast\"");
  Json phase = layer_fields();
  phase[op_field::kPhasesUs].erase("shared");
  EXPECT_EQ(check_op_fields("layer", phase).message(), "extra.phases_us.shared: required, missing");
  Json negative = layer_fields();
  negative[op_field::kDroppedPairs] = {0, -1};
  EXPECT_EQ(check_op_fields("layer", negative).message(), "extra.dropped_pairs[1]: must be >= 0, got -1");
  Json fractional = layer_fields();
  fractional[op_field::kDroppedTokens] = {0.5};
  EXPECT_EQ(check_op_fields("layer", fractional).message(),
            "extra.dropped_tokens[0]: must be of type integer, got number 0.5");
  EXPECT_EQ(check_op_fields("layer", Json{{op_field::kMaskRatio, 1.5}}).message(),
            "extra.mask_ratio: must be <= 1, got 1.5");
  // eplb's balancedness is an object, the layer's an array.
  EXPECT_EQ(check_op_fields("eplb", Json{{op_field::kBalancedness, {0.5}}}).message(),
            "extra.balancedness: must be of type object, got array [0.5]");
  Json rebalance = eplb_fields();
  rebalance[op_field::kRebalances][0]["moved"] = 1;
  EXPECT_EQ(check_op_fields("eplb", rebalance).message(), "extra.rebalances[0].moved: is not declared");
  EXPECT_EQ(check_op_fields("eplb", Json{{op_field::kPolicy, ""}}).message(),
            "extra.policy: must have at least 1 characters, got \"\"");
}

// The typed fields write every field the schema declares for their op, and nothing else.
TEST(OpFields, TypedFieldsWriteExactlyTheDeclaredFields) {
  const Json& defs = results_schema().at("$defs");
  LayerFields layer;
  layer.expert_load = {{1, 2}};
  layer.balancedness = {0.5};
  const Json layer_json = to_json(layer);
  EXPECT_TRUE(check_op_fields("layer", layer_json).ok()) << check_op_fields("layer", layer_json).message();
  EXPECT_EQ(layer_json.size(), defs.at("layer_fields").at("properties").size());
  EXPECT_EQ(layer_json.at(op_field::kPhasesUs).size(), kLayerPhases.size());
  EplbWindowFields eplb;
  eplb.policy = "static";
  eplb.rebalances.push_back({.request = 1, .switch_step = 3, .moved_bytes = {1.0, 2.0, 3.0}});
  const Json eplb_json = to_json(eplb);
  EXPECT_TRUE(check_op_fields("eplb", eplb_json).ok()) << check_op_fields("eplb", eplb_json).message();
  EXPECT_EQ(eplb_json.size(), defs.at("eplb_fields").at("properties").size());
  EXPECT_EQ(eplb_json.at(op_field::kRebalances).at(0).at(op_field::kMovedBytes).at("cross_node"), 3.0);
}

CaseResult layer_case(Json extra) {
  CaseResult c;
  c.op = "layer";
  c.transport = "mpi";
  c.mode = "ht-rank-major/ht-rank";
  c.dtype = "bf16";
  c.sizes = {{"tokens", 64}};
  c.extra = std::move(extra);
  c.times_us = {10.0, 11.0};
  return c;
}

TEST(OpFields, TheWriterRefusesABadCaseAsAProgrammingError) {
  EXPECT_TRUE(case_to_json(layer_case(layer_fields())).ok());
  Json undeclared = layer_fields();
  undeclared["energy_joules"] = 3.5;
  try {
    (void)case_to_json(layer_case(undeclared));
    FAIL() << "an undeclared op field was written";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "results: a case of op 'layer' with a bad op field, a programming error: extra.energy_joules: is not "
        "declared for op 'layer' in results/schema/results-v1.schema.json ($defs/layer_fields; "
        "docs/results.md 9.6)");
  }
  Json wrong = layer_fields();
  wrong[op_field::kExpertLoad] = "hot";
  ResultsWriter writer("/nonexistent-dir/never-written.json",
                       make_run_header({"epsuite"}, Json::object(), Json::object()));
  EXPECT_THROW((void)writer.add_case(layer_case(wrong)), std::logic_error);
  EXPECT_TRUE(writer.document()["results"].empty());
}

}  // namespace
}  // namespace eps
