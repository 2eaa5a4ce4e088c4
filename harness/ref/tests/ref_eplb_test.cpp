// `epsuite ref eplb` (docs/eplb.md 8): the JSON tool on the golden vector of docs/eplb.md 8.2, hand cases and
// bad input.
#include <gtest/gtest.h>

#include "harness/ref/ref_tool.hpp"

namespace eps {
namespace {

Result<Json> run(const Json& input) {
  for (const RefTool& tool : ref_tools()) {
    if (tool.name == "eplb") return tool.run(input);
  }
  ADD_FAILURE() << "tool eplb is not registered";
  return invalid_argument("tool", "missing");
}

Json golden_input() {
  return Json::parse(R"({"policy": "deepseek",
    "weight": [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
               [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]],
    "num_replicas": 16, "num_groups": 4, "num_nodes": 2, "num_ranks": 8})");
}

std::string error_of(const Json& input) {
  auto out = run(input);
  EXPECT_FALSE(out.ok());
  return out.ok() ? "" : out.status().message();
}

// docs/eplb.md 8.2 golden vector.
TEST(RefEplb, GoldenVector) {
  const Json out = run(golden_input()).value();
  EXPECT_EQ(out["phy2log"], Json::parse("[[5,6,5,7,8,4,3,4,10,9,10,2,0,1,11,1],"
                                        "[7,10,6,8,6,11,8,9,2,4,5,1,5,0,3,1]]"));
  ASSERT_EQ(out["logcnt"].size(), 2u);
  ASSERT_EQ(out["log2phy"].size(), 2u);
  // Moves are counted against the static placement (slot p held expert p mod 12): an independent count of
  // the slots whose expert differs.
  int changed = 0;
  for (int l = 0; l < 2; ++l) {
    int replicas = 0;
    for (int e = 0; e < 12; ++e) {
      const int count = out["logcnt"][l][e].get<int>();
      replicas += count;
      for (int j = 0; j < count; ++j) EXPECT_EQ(out["phy2log"][l][out["log2phy"][l][e][j].get<int>()], e);
    }
    EXPECT_EQ(replicas, 16);
    for (int p = 0; p < 16; ++p) changed += out["phy2log"][l][p].get<int>() != p % 12;
    EXPECT_EQ(out["rank_load"][l].size(), 8u);
  }
  EXPECT_EQ(out["moved_experts"].get<int>(), changed);
  EXPECT_EQ(out["policy"], "deepseek");
}

// Greedy = LPT on [4, 7, 1, 7, 3, 2] over 2 ranks: [1, 0, 2 | 3, 4, 5] (hand-derived in
// reference/eplb/tests/deepseek_test.cpp). Rank loads 7 + 4 + 1 = 12 and 7 + 3 + 2 = 12 -> beta 1.
// Against the static identity, slots 0 and 1 swap experts 0 and 1 inside rank 0: 2 same-rank moves.
TEST(RefEplb, GreedyLoadsMovesAndBytes) {
  const Json out = run(Json::parse(R"({"policy": "greedy", "weight": [[4, 7, 1, 7, 3, 2]],
      "num_replicas": 6, "num_ranks": 2, "bytes_per_expert": 10})"))
                       .value();
  EXPECT_EQ(out["phy2log"], Json::parse("[[1, 0, 2, 3, 4, 5]]"));
  EXPECT_EQ(out["rank_load"], Json::parse("[[12.0, 12.0]]"));
  EXPECT_EQ(out["balancedness"], Json::parse("[1.0]"));
  EXPECT_EQ(out["balancedness_aggregate"].get<double>(), 1.0);
  EXPECT_EQ(out["moved_experts"].get<int>(), 2);
  EXPECT_EQ(out["moved"], Json::parse(R"({"same_rank": 2, "same_node": 0, "cross_node": 0})"));
  EXPECT_EQ(out["moved_bytes"]["same_rank"].get<double>(), 20.0);
  EXPECT_EQ(out["moved_bytes"]["total"].get<double>(), 20.0);
}

// mindie-ex hand case (reference/eplb/tests/mindie_test.cpp): one swap e0 <-> e2. Rank loads 1 + 8 = 9 and
// 10 + 1 = 11 -> beta = 10 / 11. Moves against `current`: slots 0 and 2 change; one node of 2 ranks,
// so both are same-node copies.
TEST(RefEplb, MindieExchangeWithCurrent) {
  const Json out = run(Json::parse(R"({"policy": "mindie-ex", "weight": [[10, 8, 1, 1]],
      "num_replicas": 4, "num_ranks": 2, "max_move": 5, "current": [[0, 1, 2, 3]]})"))
                       .value();
  EXPECT_EQ(out["phy2log"], Json::parse("[[2, 1, 0, 3]]"));
  EXPECT_EQ(out["slot_permutation"], Json::parse("[[2, 1, 0, 3]]"));
  EXPECT_EQ(out["rank_load"], Json::parse("[[9.0, 11.0]]"));
  EXPECT_EQ(out["balancedness"][0].get<double>(), 10.0 / 11.0);
  EXPECT_EQ(out["moved"], Json::parse(R"({"same_rank": 0, "same_node": 2, "cross_node": 0})"));
}

// mindie-a2a hand case with [R][E] traffic applied to the single layer; realized beta on a next window:
// placement [0, 2, 3 | 1, 3, 2]; next loads [4, 4, 2, 2]: r0 = 4 + 1 + 1 = 6, r1 = 4 + 1 + 1 = 6 -> 1.
TEST(RefEplb, MindieA2AWithTrafficAndNextWindow) {
  const Json out = run(Json::parse(R"({"policy": "mindie-a2a", "weight": [[10, 8, 7, 3]],
      "traffic": [[10, 0, 3, 1], [0, 8, 4, 2]], "num_replicas": 6, "num_ranks": 2,
      "next_weight": [[4, 4, 2, 2]]})"))
                       .value();
  EXPECT_EQ(out["phy2log"], Json::parse("[[0, 2, 3, 1, 3, 2]]"));
  EXPECT_EQ(out["balancedness_realized"], Json::parse("[1.0]"));
}

TEST(RefEplb, BadInputNamesTheField) {
  Json in = golden_input();
  in["policy"] = "best";
  EXPECT_EQ(
      error_of(in),
      "policy: must be one of {deepseek, greedy, static, mindie-a2a, mindie-ag, mindie-ex}, got \"best\"");
  in = golden_input();
  in.erase("weight");
  EXPECT_EQ(error_of(in), "weight: required field is missing");
  in = golden_input();
  in["weight"][1][2] = "nan";
  EXPECT_EQ(error_of(in), "weight[1][2]: expected a number >= 0, got \"nan\"");
  in = golden_input();
  in["weight"][0][0] = -5;
  EXPECT_EQ(error_of(in), "weight[0][0]: must be a finite number >= 0, got -5");
  in = golden_input();
  in["num_replicas"] = 20;
  EXPECT_EQ(error_of(in), "num_replicas: must be a multiple of num_ranks = 8, got 20");
  in = golden_input();
  in["num_ranks"] = 0;
  EXPECT_EQ(error_of(in), "num_ranks: must be in [1, 16777216], got 0");
  in = golden_input();
  in["current"] = Json::parse("[[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]");
  EXPECT_EQ(error_of(in).rfind("current: placement: coverage:", 0), 0u);
  in = golden_input();
  in["current"] = Json::parse("[[0, 1.5]]");
  EXPECT_EQ(error_of(in), "current[0][1]: expected an expert id, got 1.5");
  in = golden_input();
  in["policy"] = "mindie-a2a";
  in["traffic"] = Json::parse("[[1, 2]]");
  EXPECT_EQ(error_of(in), "traffic[0]: expected num_ranks = 8 rows, got 1");
}

}  // namespace
}  // namespace eps
