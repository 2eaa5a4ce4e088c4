// Combine trees (docs/dispatch.md 5.5): summation-order cases that a wrong order would get wrong, and input
// checks.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/combine.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

NodeLayout nodes_of(int ranks, int ranks_per_node) {
  return value_or_throw(NodeLayout::uniform(ranks, ranks_per_node));
}

using testing::bits_of;
using testing::routing;

float pow2(int e) { return std::ldexp(1.0f, e); }

// One token on rank 0 whose K slots are experts `experts` (one expert per rank, E = R), H = 1.
DispatchPlan one_token_plan(int num_ranks, std::vector<int> experts) {
  const int k = static_cast<int>(experts.size());
  DispatchConfig config{
      .num_ranks = num_ranks, .num_experts = num_ranks, .top_k = k, .hidden = 1, .max_tokens_per_rank = 1};
  std::vector<RankRouting> r(num_ranks, routing(0, {}, {}));
  r[0] = routing(1, std::move(experts), std::vector<float>(k, 1.0f));
  return value_or_throw(DispatchPlan::make(config, std::move(r)));
}

PartialRowFn table_partial(std::vector<float> by_rank) {
  return [by_rank](int q, int, int, std::span<bf16> row) { row[0] = bf16::from_float(by_rank[q]); };
}

BiasRowFn constant_bias(float value) {
  return [value](int, int, std::span<bf16> row) { row[0] = bf16::from_float(value); };
}

TEST(CombineTrees, BiasIsAddedBeforeThePartials) {
  // R = 3, the token reaches every rank; bias0 = 1, partials [2^-8, 2^-24, 2^-24].
  // Bias first (docs/dispatch.md 5.5 left to right): 1 + 2^-8 = 1.00390625 (exact); + 2^-24 is half an fp32
  // ulp of 1.0039 and ties to the even neighbour 1.00390625, twice -> bf16(1.00390625) is a tie -> 1.0
  // (0x3F80). Partials first would give 2^-8 + 2^-23, + 1 = 1.00390637 -> bf16 1.0078125 (0x3F81).
  const DispatchPlan plan = one_token_plan(3, {0, 1, 2});
  const PartialRowFn partial = table_partial({pow2(-8), pow2(-24), pow2(-24)});
  const CombineBias bias{constant_bias(1.0f), {}};
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial, bias))),
            (std::vector<std::uint16_t>{0x3F80}));
  // Same with bias1 instead of bias0: acc = (+0 + 1) = 1 first.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial, {{}, constant_bias(1.0f)}))),
            (std::vector<std::uint16_t>{0x3F80}));
  // ht-two-level with one rank per node has the same order: bias, then nodes 0, 1, 2.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(plan, 0, nodes_of(3, 1), partial, bias))),
            (std::vector<std::uint16_t>{0x3F80}));
  // Without the bias: 0 + 2^-8 + 2^-24 + 2^-24 = 2^-8 + 2^-23 exactly -> bf16 2^-8 (0x3B80).
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial))),
            (std::vector<std::uint16_t>{0x3B80}));
}

TEST(CombineTrees, NegativeZeroFollowsTheAccumulatorStart) {
  const DispatchPlan plan = one_token_plan(1, {0});
  const PartialRowFn partial = table_partial({-0.0f});
  // bias0 + bias1 = -0 + -0 = -0; + -0 = -0 -> 0x8000.
  EXPECT_EQ(bits_of(value_or_throw(
                expected_ht_rank_combine(plan, 0, partial, {constant_bias(-0.0f), constant_bias(-0.0f)}))),
            (std::vector<std::uint16_t>{0x8000}));
  // Absent biases read +0.0: +0 + +0 = +0; + -0 = +0 -> 0x0000.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial))),
            (std::vector<std::uint16_t>{0x0000}));
  // One bias -0, the other absent: -0 + +0 = +0 -> 0x0000.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial, {constant_bias(-0.0f), {}}))),
            (std::vector<std::uint16_t>{0x0000}));
}

TEST(CombineTrees, TwoLevelRoundsEachNode) {
  // R = 4, 2 ranks per node; the token reaches ranks {0, 1, 3}: partials 1, 2^-8, 2^-8.
  // ht-rank: 0 + 1 + 2^-8 + 2^-8 = 1.0078125 -> 0x3F81.
  // two-level: node 0 = bf16(0 + 1 + 2^-8) = bf16(1.00390625), a tie -> 1.0; node 1 = bf16(2^-8);
  //            acc = 0 + 1.0 + 2^-8 = 1.00390625 -> tie -> 1.0 (0x3F80).
  const DispatchPlan plan = one_token_plan(4, {3, 0, 1});
  const PartialRowFn partial = table_partial({1.0f, pow2(-8), 100.0f, pow2(-8)});
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 0, partial))),
            (std::vector<std::uint16_t>{0x3F81}));
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(plan, 0, nodes_of(4, 2), partial))),
            (std::vector<std::uint16_t>{0x3F80}));
  // A single node of 4 ranks: node = bf16(1 + 2^-8 + 2^-8) = 1.0078125 -> 0x3F81.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(plan, 0, nodes_of(4, 4), partial))),
            (std::vector<std::uint16_t>{0x3F81}));
}

TEST(CombineTrees, TwoLevelReducesPerActualNode) {
  // SPEC 14.2, docs/dispatch.md 5.5.1: nodes of any size and any ranks, ascending by lowest rank. The token
  // reaches ranks {0, 1, 3} with partials 1, 2^-8, 2^-8 (as above).
  const DispatchPlan plan = one_token_plan(4, {3, 0, 1});
  const PartialRowFn partial = table_partial({1.0f, pow2(-8), 100.0f, pow2(-8)});
  const auto combine = [&](std::vector<int> groups) {
    return bits_of(
        value_or_throw(expected_ht_two_level_combine(plan, 0, NodeLayout::from_groups(groups), partial)));
  };
  // Nodes {0} and {1, 2, 3}: node 0 = 1, node 1 = bf16(2^-8 + 2^-8) = 2^-7; 1 + 2^-7 exact -> 0x3F81.
  EXPECT_EQ(combine({0, 1, 1, 1}), (std::vector<std::uint16_t>{0x3F81}));
  // Nodes {0, 1, 2} and {3}: node 0 = bf16(1 + 2^-8), a tie -> 1.0; + 2^-8 -> tie -> 1.0 (0x3F80).
  EXPECT_EQ(combine({0, 0, 0, 1}), (std::vector<std::uint16_t>{0x3F80}));
  // Nodes {0, 3} and {1, 2} (not consecutive): node 0 = bf16(1 + 2^-8) = 1.0 first, then node 1 = 2^-8:
  // 1 + 2^-8 -> 1.0 (0x3F80). Summing runs of equal node in rank order (node 0, node 1, node 0 again) would
  // keep 1 + 2^-8 in fp32 and add the last 2^-8: 0x3F81.
  EXPECT_EQ(combine({0, 1, 1, 0}), (std::vector<std::uint16_t>{0x3F80}));
}

TEST(CombineTrees, LlWeightedProductRoundsBeforeTheAdd) {
  // Slot 0: w = 1, y = -(1 + 2^-7) -> acc = -(1 + 2^-7).
  // Slot 1: w = 1 + 2^-17 + 2^-23 (fp32), y = 1 + 2^-7 (bf16). Exact product
  //   1 + 2^-7 + 2^-17 + 2^-23 + 2^-24 + 2^-30 rounds in fp32 (ulp 2^-23) to 1 + 2^-7 + 2^-17 + 2^-22;
  //   acc + product = 2^-17 + 2^-22 = 2^-17 · (1 + 2^-5) -> bf16 exact, 0x3704.
  // A fused multiply-add would keep 2^-17 + 2^-23 + 2^-24 + 2^-30 -> bf16 2^-17 · (1 + 3·2^-7) = 0x3703.
  DispatchConfig config{.num_ranks = 1, .num_experts = 2, .top_k = 2, .hidden = 1, .max_tokens_per_rank = 1};
  const float w1 = 1.0f + pow2(-17) + pow2(-23);
  const DispatchPlan plan = value_or_throw(DispatchPlan::make(config, {routing(1, {0, 1}, {1.0f, w1})}));
  const SlotOutputFn y = [](int, int, int k, std::span<bf16> row) {
    row[0] = bf16::from_float(k == 0 ? -(1.0f + pow2(-7)) : 1.0f + pow2(-7));
  };
  EXPECT_EQ(bits_of(value_or_throw(expected_ll_combine(plan, 0, y))), (std::vector<std::uint16_t>{0x3704}));
}

TEST(CombineTrees, InputErrors) {
  const DispatchPlan plan = one_token_plan(4, {0});
  const PartialRowFn partial = table_partial({1, 1, 1, 1});
  const auto bad_node = expected_ht_two_level_combine(plan, 0, nodes_of(2, 1), partial);
  ASSERT_FALSE(bad_node.ok());
  EXPECT_EQ(bad_node.status().message(), "nodes: must place the 4 ranks of the run, got a layout of 2");
  const NodeLayout misnumbered{{1, 0, 1, 0}, {2, 2}};
  EXPECT_EQ(
      expected_ht_two_level_combine(plan, 0, misnumbered, partial).status().message(),
      "nodes: nodes must be numbered by their lowest rank with their sizes listed, got node_of [1, 0, 1, "
      "0] and sizes [2, 2]");
  EXPECT_EQ(expected_ht_rank_combine(plan, 4, partial).status().message(), "rank: must be in [0, 3], got 4");
  EXPECT_EQ(expected_ll_combine(plan, -1, {}).status().message(), "rank: must be in [0, 3], got -1");
}

TEST(CombineTrees, CompareReportsFirstMismatch) {
  DispatchConfig config{.num_ranks = 1, .num_experts = 1, .top_k = 1, .hidden = 2, .max_tokens_per_rank = 2};
  const DispatchPlan plan = value_or_throw(DispatchPlan::make(config, {routing(2, {0, 0}, {1, 1})}));
  const std::vector<bf16> expected{bf16::from_bits(1), bf16::from_bits(2), bf16::from_bits(3),
                                   bf16::from_bits(4)};
  std::vector<bf16> actual = expected;
  EXPECT_TRUE(compare_combine(plan, 0, expected, actual).ok());
  actual[3] = bf16::from_bits(0x8004);
  actual[2] = bf16::from_bits(0x7fc0);
  const MismatchReport report = compare_combine(plan, 0, expected, actual);
  EXPECT_EQ(report.mismatches(), 2);
  ASSERT_TRUE(report.first().has_value());
  EXPECT_EQ(report.first()->src_rank, 0);
  EXPECT_EQ(report.first()->src_token, 1);
  EXPECT_EQ(report.first()->column, 0);
  EXPECT_EQ(report.first()->expected_bits, 3u);
  EXPECT_EQ(report.first()->actual_bits, 0x7fc0u);
  EXPECT_EQ(report.to_string(),
            "2 mismatches; first: combined_x rank 0 src (0, 1) column 0: expected 0x3 actual 0x7fc0");
  actual.pop_back();
  EXPECT_EQ(compare_combine(plan, 0, expected, actual).mismatches(), 2);  // size + the NaN element
}

}  // namespace
}  // namespace eps::dispatch
