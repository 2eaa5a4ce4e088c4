// Replica numbering of the dispatch ExpertMap against the EPLB replica rule (docs/eplb.md 8.4): replica j of
// expert e is log2phy[e][j], which for the deepseek policy is replication order, not ascending slot id
// (docs/eplb.md 8.2). reference/dispatch does not depend on reference/eplb; only this test joins them.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/expert_map.hpp"
#include "reference/eplb/policy.hpp"
#include "reference/eplb/replica_rule.hpp"

namespace eps::dispatch {
namespace {

constexpr int kRanks = 8;
constexpr int kExperts = 12;

// The docs/eplb.md 8.2 golden vector: 2 layers, E = 12, P = 16, 4 groups, 2 nodes, 8 ranks.
eplb::Placement golden_placement() {
  eplb::EplbProblem problem;
  problem.weight = {{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                    {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  problem.num_replicas = 16;
  problem.num_groups = 4;
  problem.num_nodes = 2;
  problem.num_ranks = kRanks;
  return value_or_throw(value_or_throw(eplb::find_eplb_policy("deepseek"))->plan(problem)).placement;
}

// log2phy of one layer as [E] rows, -1 padded to max_replicas (docs/eplb.md 8.1).
std::vector<std::vector<int>> log2phy_rows(const eplb::Placement& p, int layer) {
  std::vector<std::vector<int>> rows(static_cast<std::size_t>(p.num_experts));
  for (int e = 0; e < p.num_experts; ++e) {
    for (int j = 0; j < p.max_replicas; ++j) rows[e].push_back(p.replica_slot(layer, e, j));
  }
  return rows;
}

ExpertMap map_of(const eplb::Placement& p, int layer, bool with_log2phy) {
  const std::span<const int> phy2log = p.layer_slots(layer);
  const std::vector<std::vector<int>> log2phy =
      with_log2phy ? log2phy_rows(p, layer) : std::vector<std::vector<int>>();
  return value_or_throw(ExpertMap::make_replicated(p.num_ranks, p.num_experts, phy2log, log2phy));
}

int global_slot(const ExpertMap& map, SlotPlacement placement) {
  return placement.rank * map.slots_per_rank() + placement.local;
}

int eplb_slot(const eplb::Placement& p, int layer, int expert, int token, int k, int top_k) {
  const eplb::Assignment a{.layer = layer, .expert = expert, .token = token, .k = k, .top_k = top_k};
  return value_or_throw(eplb::replica_slot_for(p, a, eplb::ReplicaRule::kModulo, 1));
}

// Counts the (t, k, expert) triples, out of `trials` random ones, where the ExpertMap and the EPLB
// replica rule pick different slots.
int disagreements(const eplb::Placement& p, int layer, const ExpertMap& map, int trials) {
  std::mt19937 rng(20240611u + static_cast<unsigned>(layer));
  std::uniform_int_distribution<int> token(0, 4095);
  std::uniform_int_distribution<int> top_k(1, 8);
  std::uniform_int_distribution<int> expert(0, kExperts - 1);
  int differ = 0;
  for (int i = 0; i < trials; ++i) {
    const int t = token(rng);
    const int k_count = top_k(rng);
    const int k = std::uniform_int_distribution<int>(0, k_count - 1)(rng);
    const int e = expert(rng);
    const int slot = global_slot(map, map.place(e, t, k, k_count));
    if (slot != eplb_slot(p, layer, e, t, k, k_count)) ++differ;
  }
  return differ;
}

TEST(ReplicaOrder, GoldenPlacementIsNotInSlotOrder) {
  // docs/eplb.md 8.2 layer 0: expert 1 is held by slots 13 and 15, and its log2phy is [15, 13].
  const eplb::Placement p = golden_placement();
  EXPECT_EQ(p.replica_slot(0, 1, 0), 15);
  EXPECT_EQ(p.replica_slot(0, 1, 1), 13);
  const ExpertMap map = map_of(p, 0, /*with_log2phy=*/true);
  EXPECT_EQ(std::vector<int>(map.replicas(1).begin(), map.replicas(1).end()), (std::vector<int>{15, 13}));
  // Token 0, k 0 of K 2: flat index 0 -> replica 0 = slot 15 = rank 7 (2 slots per rank), local 1.
  EXPECT_EQ(map.place(1, 0, 0, 2), (SlotPlacement{7, 1}));
  EXPECT_EQ(map.place(1, 0, 1, 2), (SlotPlacement{6, 1}));  // replica 1 = slot 13
}

TEST(ReplicaOrder, ExpertMapAgreesWithTheEplbReplicaRule) {
  const eplb::Placement p = golden_placement();
  for (int layer = 0; layer < p.num_layers; ++layer) {
    EXPECT_EQ(disagreements(p, layer, map_of(p, layer, /*with_log2phy=*/true), 400), 0) << "layer " << layer;
  }
}

// The check above can fail: numbering by ascending slot id picks the other replica for half the
// assignments to a replicated expert whose log2phy is not ascending.
TEST(ReplicaOrder, AscendingSlotOrderDisagreesWithDeepseek) {
  const eplb::Placement p = golden_placement();
  EXPECT_GT(disagreements(p, 0, map_of(p, 0, /*with_log2phy=*/false), 400), 0);
}

// Slot-order policies (static here) number replicas by ascending slot id, so log2phy changes nothing.
TEST(ReplicaOrder, SlotOrderPoliciesNeedNoLog2phy) {
  const eplb::Placement p = value_or_throw(eplb::static_placement(1, kExperts, 24, kRanks));
  const ExpertMap with = map_of(p, 0, /*with_log2phy=*/true);
  const ExpertMap without = map_of(p, 0, /*with_log2phy=*/false);
  for (int e = 0; e < kExperts; ++e) {
    EXPECT_EQ(std::vector<int>(with.replicas(e).begin(), with.replicas(e).end()),
              std::vector<int>(without.replicas(e).begin(), without.replicas(e).end()));
  }
  EXPECT_EQ(disagreements(p, 0, with, 400), 0);
}

TEST(ReplicaOrder, Log2phyMustInvertPhy2log) {
  // R = 2, E = 3, P = 4: expert 0 on slots 1 and 3.
  const std::vector<int> phy2log{2, 0, 1, 0};
  const auto error = [&](std::vector<std::vector<int>> log2phy) {
    return ExpertMap::make_replicated(2, 3, phy2log, log2phy).status().message();
  };
  EXPECT_EQ(error({{3, 1}, {2}}), "log2phy: must have one row per expert (3), got 2");
  EXPECT_EQ(error({{3}, {2, -1}, {0, -1}}),
            "log2phy[0]: lists 1 slots, but phy2log holds expert 0 in 2 slots");
  EXPECT_EQ(error({{3, 4}, {2, -1}, {0, -1}}), "log2phy[0][1]: must be in [0, 3], got 4");
  EXPECT_EQ(error({{3, 2}, {2, -1}, {0, -1}}),
            "log2phy[0][1]: slot 2 holds expert 1 in phy2log, not 0 (docs/eplb.md 8.1)");
  EXPECT_EQ(error({{3, 3}, {2, -1}, {0, -1}}), "log2phy[0][1]: slot 3 is listed twice");
  EXPECT_EQ(error({{3, 1}, {2, 0}, {0, -1}}), "log2phy[1][1]: must be -1 (expert 1 has 1 replicas), got 0");
  const std::vector<std::vector<int>> padded{{3, 1, -1}, {2}, {0}};
  const ExpertMap map = value_or_throw(ExpertMap::make_replicated(2, 3, phy2log, padded));
  EXPECT_EQ(std::vector<int>(map.replicas(0).begin(), map.replicas(0).end()), (std::vector<int>{3, 1}));
}

}  // namespace
}  // namespace eps::dispatch
