// docs/eplb.md 8.2: the deepseek policy and its building blocks.
#include <gtest/gtest.h>

#include "reference/eplb/packing.hpp"
#include "reference/eplb/policy.hpp"

namespace eps::eplb {
namespace {

using Rows = std::vector<std::vector<int>>;

Placement plan_deepseek(std::vector<std::vector<double>> weight, int p, int g, int n, int r) {
  EplbProblem problem;
  problem.weight = std::move(weight);
  problem.num_replicas = p;
  problem.num_groups = g;
  problem.num_nodes = n;
  problem.num_ranks = r;
  auto plan = find_eplb_policy("deepseek").value()->plan(problem);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.value().placement;
}

// docs/eplb.md 8.2 golden vector, bit-exact.
TEST(Deepseek, SpecGoldenVector) {
  const Placement p = plan_deepseek({{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                                     {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}},
                                    16, 4, 2, 8);
  EXPECT_EQ(phy2log_rows(p), (Rows{{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
                                   {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}}));
  EXPECT_TRUE(check_placement(p).ok());
}

// groups % nodes != 0 takes the global path (groups = nodes = 1). Hand computation, E = 6, P = 8, R = 2,
// loads [10, 1, 6, 3, 2, 8]:
//   replicate: slot 6 -> argmax load/cnt = e0 (10), cnt0 = 2; slot 7 -> e5 (8 > 6 > 5), cnt5 = 2.
//   replica weights by physical index 0..7: [5, 1, 6, 3, 2, 4, 5, 4].
//   pack 8 items into 2 ranks of 4, order (w desc, idx asc): 2(6) 0(5) 6(5) 5(4) 7(4) 3(3) 4(2) 1(1):
//     2->r0 [6]; 0->r1 [5]; 6->r1 [10]; 5->r0 [10]; 7->r0 (tie 10/10, lowest) [14]; 3->r1 [13];
//     4->r1 [15, full]; 1->r0 [15].
//   rank 0 = items 2, 5, 7, 1 -> experts 2, 5, 5, 1; rank 1 = items 0, 6, 3, 4 -> experts 0, 0, 3, 4.
TEST(Deepseek, GlobalPathWhenGroupsNotDivisibleByNodes) {
  const Placement p = plan_deepseek({{10, 1, 6, 3, 2, 8}}, 8, 3, 2, 2);
  EXPECT_EQ(phy2log_rows(p), (Rows{{2, 5, 5, 1, 0, 0, 3, 4}}));
  // log2phy in replication order: e0 replica 0 (item 0) at slot 4, replica 1 (item 6) at slot 5.
  EXPECT_EQ(p.replica_slot(0, 0, 0), 4);
  EXPECT_EQ(p.replica_slot(0, 0, 1), 5);
  EXPECT_EQ(p.replica_slot(0, 5, 0), 1);
  EXPECT_EQ(p.replica_slot(0, 5, 1), 2);
  EXPECT_EQ(p.replica_slot(0, 1, 1), -1);
  EXPECT_EQ(p.max_replicas, 2);
}

// With one group per node the original keeps group g on node g (no sorting): loads [1, 1, 5, 5],
// groups {0,1} (weight 2) and {2,3} (weight 10) stay on nodes 0 and 1 even though group 1 is heavier.
TEST(Deepseek, OneGroupPerNodeKeepsGroupOrder) {
  const Placement p = plan_deepseek({{1, 1, 5, 5}}, 4, 2, 2, 2);
  EXPECT_EQ(phy2log_rows(p), (Rows{{0, 1, 2, 3}}));
}

// One hot expert gets every extra replica its node has: global path, 1000 / 9 > 1 for all 8 extras.
TEST(Deepseek, HotExpertGetsTheMostReplicas) {
  const Placement global = plan_deepseek({{1, 1, 1, 1000, 1, 1, 1, 1}}, 16, 1, 1, 4);
  EXPECT_EQ(global.replica_count(0, 3), 9);
  for (int e : {0, 1, 2, 4, 5, 6, 7}) EXPECT_EQ(global.replica_count(0, e), 1);
  // Hierarchical (2 groups, 2 nodes, 8 slots per node): node 0 gives its 4 extras to expert 3
  // (1000/5 = 200 > 1); node 1 has four equal experts, one extra each (ties lowest e first).
  const Placement hier = plan_deepseek({{1, 1, 1, 1000, 1, 1, 1, 1}}, 16, 2, 2, 4);
  EXPECT_EQ(hier.replica_count(0, 3), 5);
  for (int e : {0, 1, 2}) EXPECT_EQ(hier.replica_count(0, e), 1);
  for (int e : {4, 5, 6, 7}) EXPECT_EQ(hier.replica_count(0, e), 2);
}

// All-zero loads: every ratio is 0, so every tie goes to the lowest id: all extras to expert 0, and the
// zero-weight replicas fill rank 0 first (items 0..3), then rank 1.
TEST(Deepseek, AllZeroLoadsFollowLowestIdTies) {
  const Placement p = plan_deepseek({{0, 0, 0, 0}}, 8, 1, 1, 2);
  EXPECT_EQ(phy2log_rows(p), (Rows{{0, 1, 2, 3, 0, 0, 0, 0}}));
  EXPECT_EQ(p.replica_count(0, 0), 5);
}

// All-equal loads: extras go to e0, e1, e2, e3 in turn (6/1 beats 6/2), so items 0..7 hold experts
// [0, 1, 2, 3, 0, 1, 2, 3], all weighing 3. Packing in index order alternates: item 0 -> r0 (tie), item 1 ->
// r1 (0 < 3), item 2 -> r0 (tie 3/3), item 3 -> r1, ... so r0 = items 0, 2, 4, 6 and r1 = items 1, 3, 5, 7.
TEST(Deepseek, AllEqualLoads) {
  const Placement p = plan_deepseek({{6, 6, 6, 6}}, 8, 1, 1, 2);
  EXPECT_EQ(phy2log_rows(p), (Rows{{0, 2, 0, 2, 1, 3, 1, 3}}));
}

// lpt_packing hand case: weights [4, 7, 1, 7, 3, 2], 2 packs of 3.
// order 1(7) 3(7) 0(4) 4(3) 5(2) 2(1): 1->p0 [7]; 3->p1 [7]; 0->p0 (tie, lowest) [11]; 4->p1 [10];
// 5->p1 [12, full]; 2->p0.
TEST(Packing, LptHandCase) {
  const std::vector<double> w = {4, 7, 1, 7, 3, 2};
  const Packing p = lpt_packing(w, 2);
  EXPECT_EQ(p.pack, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(p.rank_in_pack, (std::vector<int>{1, 0, 2, 0, 1, 2}));
}

TEST(Packing, BalancedPackingShortcutOnlyForOneItemPerPack) {
  const std::vector<double> w = {1, 9, 5};
  EXPECT_EQ(balanced_packing(w, 3).pack, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(lpt_packing(w, 3).pack, (std::vector<int>{2, 0, 1}));
  const std::vector<double> w4 = {4, 7, 1, 7, 3, 2};
  EXPECT_EQ(balanced_packing(w4, 2).pack, lpt_packing(w4, 2).pack);
}

// replicate_experts hand case: weights [6, 3, 4], 6 slots.
// slot 3: max(6, 3, 4) -> e0 (cnt 2, 3); slot 4: max(3, 3, 4) -> e2 (cnt 2, 2);
// slot 5: max(3, 3, 2) tie -> e0 (cnt 3).
TEST(Packing, ReplicateHandCase) {
  const std::vector<double> w = {6, 3, 4};
  const Replication r = replicate_experts(w, 6);
  EXPECT_EQ(r.slot_expert, (std::vector<int>{0, 1, 2, 0, 2, 0}));
  EXPECT_EQ(r.slot_replica, (std::vector<int>{0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(r.count, (std::vector<int>{3, 1, 2}));
}

}  // namespace
}  // namespace eps::eplb
