// docs/eplb.md 8.1 invariants for every registered policy on random loads, and input validation
// (docs/errors.md 10).
#include "reference/eplb/policy.hpp"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "reference/eplb/tests/test_util.hpp"

namespace eps::eplb {
namespace {

struct Shape {
  int layers, experts, slots, groups, nodes, ranks;
};

// Shapes valid for every policy that accepts them; greedy only runs where P == E.
const Shape kShapes[] = {
    {2, 12, 16, 4, 2, 8},  // the docs/eplb.md 8.2 golden shape
    {3, 16, 16, 4, 2, 4},  // P == E
    {2, 8, 12, 2, 2, 4},   // hierarchical, 3 slots per rank
    {2, 6, 8, 3, 2, 2},    // groups % nodes != 0: global path
    {1, 32, 48, 8, 4, 8},  // several groups per node
    {2, 5, 5, 1, 1, 1},    // one rank
};

bool accepts(std::string_view policy, const Shape& s) {
  if (policy == "greedy") return s.slots == s.experts;
  if (policy.starts_with("mindie-a2a") || policy == "mindie-ag") return s.slots / s.ranks <= s.experts;
  return true;
}

EplbProblem random_problem(std::mt19937& rng, const Shape& s) {
  EplbProblem p;
  p.weight = testing::random_loads(rng, s.layers, s.experts);
  p.num_replicas = s.slots;
  p.num_groups = s.groups;
  p.num_nodes = s.nodes;
  p.num_ranks = s.ranks;
  p.traffic = testing::random_traffic(rng, s.layers, s.ranks, s.experts);
  p.max_move = 3;
  return p;
}

TEST(EplbPolicies, RegistryListsEveryPolicy) {
  EXPECT_EQ(eplb_policy_names(), (std::vector<std::string>{"deepseek", "greedy", "static", "mindie-a2a",
                                                           "mindie-ag", "mindie-ex"}));
  for (const auto& name : eplb_policy_names()) EXPECT_EQ(find_eplb_policy(name).value()->name(), name);
  auto missing = find_eplb_policy("round-robin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "policy: must be one of {deepseek, greedy, static, mindie-a2a, mindie-ag, mindie-ex}, got "
            "\"round-robin\"");
}

// Every invariant of docs/eplb.md 8.1, re-derived here from phy2log alone (independent of check_placement).
void expect_invariants(const Placement& p, const Shape& s) {
  ASSERT_EQ(p.num_layers, s.layers);
  ASSERT_EQ(p.num_slots, s.slots);
  ASSERT_EQ(p.num_ranks, s.ranks);
  for (int l = 0; l < s.layers; ++l) {
    std::vector<int> count(s.experts, 0);
    for (int slot = 0; slot < s.slots; ++slot) {
      const int e = p.slot_expert(l, slot);
      ASSERT_TRUE(e >= 0 && e < s.experts);
      ++count[e];
    }
    int total = 0;
    for (int e = 0; e < s.experts; ++e) {
      EXPECT_GE(count[e], 1);
      EXPECT_EQ(p.replica_count(l, e), count[e]);
      total += p.replica_count(l, e);
      std::vector<int> slots;
      for (int j = 0; j < p.max_replicas; ++j) {
        const int slot = p.replica_slot(l, e, j);
        if (j >= count[e]) {
          EXPECT_EQ(slot, -1);
        } else {
          EXPECT_EQ(p.slot_expert(l, slot), e);
          slots.push_back(slot);
        }
      }
      std::sort(slots.begin(), slots.end());
      EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end());
    }
    EXPECT_EQ(total, s.slots);
  }
  EXPECT_TRUE(check_placement(p).ok());
}

TEST(EplbPolicies, InvariantsHoldOnRandomLoads) {
  for (const auto& name : eplb_policy_names()) {
    const EplbPolicy& policy = *find_eplb_policy(name).value();
    for (const Shape& s : kShapes) {
      if (!accepts(name, s)) continue;
      for (std::uint32_t seed = 0; seed < 25; ++seed) {
        std::mt19937 rng(seed);
        const EplbProblem problem = random_problem(rng, s);
        auto plan = policy.plan(problem);
        ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().message();
        SCOPED_TRACE(name + " seed " + std::to_string(seed) + " E " + std::to_string(s.experts));
        expect_invariants(plan->placement, s);
      }
    }
  }
}

TEST(EplbPolicies, PEqualsEIsAPermutation) {
  std::mt19937 rng(7);
  const Shape s{3, 16, 16, 4, 2, 4};
  for (const auto& name : eplb_policy_names()) {
    const EplbProblem problem = random_problem(rng, s);
    auto plan = find_eplb_policy(name).value()->plan(problem);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().message();
    for (int l = 0; l < s.layers; ++l) {
      std::vector<int> row(plan->placement.layer_slots(l).begin(), plan->placement.layer_slots(l).end());
      std::sort(row.begin(), row.end());
      for (int e = 0; e < s.experts; ++e) EXPECT_EQ(row[e], e) << name;
    }
  }
}

TEST(EplbPolicies, StaticIsIdentityWithRoundRobinReplicas) {
  EplbProblem p;
  p.weight = {{5, 1, 2}};
  p.num_replicas = 8;
  p.num_ranks = 4;
  auto plan = find_eplb_policy("static").value()->plan(p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(phy2log_rows(plan->placement), (std::vector<std::vector<int>>{{0, 1, 2, 0, 1, 2, 0, 1}}));
}

// Greedy = LPT: loads [4, 7, 1, 7, 3, 2], 2 ranks of 3; the packing is hand-derived in deepseek_test
// (Packing.LptHandCase): rank 0 gets experts 1, 0, 2 in that order, rank 1 gets 3, 4, 5.
TEST(EplbPolicies, GreedyIsLpt) {
  EplbProblem p;
  p.weight = {{4, 7, 1, 7, 3, 2}};
  p.num_replicas = 6;
  p.num_ranks = 2;
  auto plan = find_eplb_policy("greedy").value()->plan(p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(phy2log_rows(plan->placement), (std::vector<std::vector<int>>{{1, 0, 2, 3, 4, 5}}));
}

std::string error_of(const std::string& policy, const EplbProblem& p) {
  auto plan = find_eplb_policy(policy).value()->plan(p);
  EXPECT_FALSE(plan.ok());
  if (plan.ok()) return "";
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  return plan.status().message();
}

EplbProblem golden_shape() {
  EplbProblem p;
  p.weight = {{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86}};
  p.num_replicas = 16;
  p.num_groups = 4;
  p.num_nodes = 2;
  p.num_ranks = 8;
  return p;
}

TEST(EplbValidation, BadInputsNameTheField) {
  auto p = golden_shape();
  p.num_replicas = 12 + 2;  // not a multiple of 8
  EXPECT_EQ(error_of("deepseek", p), "num_replicas: must be a multiple of num_ranks = 8, got 14");
  p = golden_shape();
  p.num_replicas = 8;
  EXPECT_EQ(error_of("deepseek", p), "num_replicas: must be in [12, 16777216], got 8");
  p = golden_shape();
  p.num_groups = 5;
  EXPECT_EQ(error_of("deepseek", p), "num_groups: must divide the number of experts E = 12, got 5");
  p = golden_shape();
  p.num_nodes = 3;
  EXPECT_EQ(error_of("deepseek", p), "num_nodes: must divide num_ranks = 8, got 3");
  p = golden_shape();
  p.num_ranks = 0;
  EXPECT_EQ(error_of("deepseek", p), "num_ranks: must be in [1, 16777216], got 0");
  p = golden_shape();
  p.weight[0][3] = -1;
  EXPECT_EQ(error_of("deepseek", p), "weight[0][3]: must be a finite number >= 0, got -1");
  p = golden_shape();
  p.weight[0][5] = std::nan("");
  EXPECT_EQ(error_of("static", p), "weight[0][5]: must be a finite number >= 0, got nan");
  p = golden_shape();
  p.weight.push_back({1, 2, 3});
  EXPECT_EQ(error_of("deepseek", p), "weight[1]: expected 12 expert loads (as weight[0]), got 3");
  p = golden_shape();
  p.weight.clear();
  EXPECT_EQ(error_of("deepseek", p), "weight: must have at least one layer, got 0");
  p = golden_shape();
  EXPECT_EQ(error_of("greedy", p), "num_replicas: greedy does not replicate: must equal E = 12, got 16");
  EXPECT_EQ(error_of("mindie-a2a", p),
            "traffic: required by mindie-a2a ([layers][num_ranks][E] token counts)");
  p.traffic = {std::vector<std::vector<double>>(8, std::vector<double>(11, 1.0))};
  EXPECT_EQ(error_of("mindie-a2a", p), "traffic[0][0]: expected 12 expert counts, got 11");
  p = golden_shape();
  p.num_replicas = 104;  // 13 slots per rank > 12 experts
  EXPECT_EQ(error_of("mindie-ag", p),
            "num_replicas: mindie-ag keeps experts distinct per rank: P/R = 13 must be <= E = 12");
  p = golden_shape();
  p.max_move = -1;
  EXPECT_EQ(error_of("mindie-ex", p), "max_move: must be in [0, 16777216], got -1");
}

TEST(EplbValidation, CurrentPlacementMustMatchAndBeValid) {
  auto p = golden_shape();
  p.current = placement_from_phy2log(std::vector<std::vector<int>>{{0, 1, 2, 3}}, 4, 2).value();
  EXPECT_NE(error_of("mindie-ex", p).find("current: expected a placement of 1 layers, E = 12, P = 16, R = 8"),
            std::string::npos);
  p = golden_shape();
  std::vector<std::vector<int>> rows = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3}};
  p.current = placement_from_phy2log(rows, 12, 8).value();
  p.current->logcnt[0] = 1;
  EXPECT_NE(error_of("mindie-ex", p).find("current: placement: count:"), std::string::npos);
}

}  // namespace
}  // namespace eps::eplb
