// docs/eplb.md 8.4 replica rule and docs/eplb.md 8.5 figures of merit on hand cases.
#include "reference/eplb/metrics.hpp"

#include <gtest/gtest.h>

#include "reference/eplb/replica_rule.hpp"

namespace eps::eplb {
namespace {

using Rows = std::vector<std::vector<int>>;

Placement from_rows(const Rows& rows, int experts, int ranks) {
  return placement_from_phy2log(rows, experts, ranks).value();
}

// phy2log [0, 1 | 0, 2], loads [8, 2, 6]: expert 0 has two replicas (4 each).
// r0 = 4 + 2 = 6, r1 = 4 + 6 = 10 -> mean 8, max 10, beta 0.8, imbalance 1.25.
// Layer 1 has zero load -> beta 1. Aggregate = (8 + 0) / (10 + 0) = 0.8.
TEST(EplbMetrics, BalancednessHandCase) {
  const Placement p = from_rows({{0, 1, 0, 2}, {0, 1, 0, 2}}, 3, 2);
  const LoadRows load = {{8, 2, 6}, {0, 0, 0}};
  EXPECT_EQ(rank_loads(p, load).value(), (LoadRows{{6, 10}, {0, 0}}));
  const Balancedness b = balancedness(p, load).value();
  EXPECT_EQ(b.per_layer, (std::vector<double>{0.8, 1.0}));
  EXPECT_EQ(b.aggregate, 0.8);
  EXPECT_EQ(imbalance(b.per_layer[0]), 1.25);
}

TEST(EplbMetrics, LoadShapeErrorsNameTheField) {
  const Placement p = from_rows({{0, 1, 0, 2}}, 3, 2);
  auto bad = balancedness(p, {{1, 2}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "weight[0]: expected 3 expert loads, got 2");
}

// R = 4 ranks of 2 slots, 2 ranks per node, E = 6.
// from = [0, 1 | 2, 3 | 4, 5 | 0, 1]
// to   = [1, 0 | 2, 4 | 1, 5 | 3, 0]
// slot 0 (r0): e1 was on r0 (slot 1) -> same rank;   slot 1 (r0): e0 was on r0 -> same rank;
// slot 2: unchanged;  slot 3 (r1, node 0): e4 only on r2 (node 1) -> cross node;
// slot 4 (r2, node 1): e1 on r0 and r3 (node 1) -> same node;  slot 5: unchanged;
// slot 6 (r3, node 1): e3 only on r1 (node 0) -> cross node;  slot 7 (r3): e0 was on r3 (slot 6) -> same
// rank.
TEST(EplbMetrics, MovedExpertsHandCase) {
  const Placement from = from_rows({{0, 1, 2, 3, 4, 5, 0, 1}}, 6, 4);
  const Placement to = from_rows({{1, 0, 2, 4, 1, 5, 3, 0}}, 6, 4);
  const MoveCounts moved = moved_experts(from, to, 2).value();
  EXPECT_EQ(moved.same_rank, 3);
  EXPECT_EQ(moved.same_node, 1);
  EXPECT_EQ(moved.cross_node, 2);
  EXPECT_EQ(moved.total(), 6);
  const MoveBytes bytes = moved_bytes(moved, 100.0);
  EXPECT_EQ(bytes.same_rank, 300.0);
  EXPECT_EQ(bytes.same_node, 100.0);
  EXPECT_EQ(bytes.cross_node, 200.0);
  // One rank per node: the same_node move becomes cross node.
  const MoveCounts per_rank = moved_experts(from, to, 1).value();
  EXPECT_EQ(per_rank.same_node, 0);
  EXPECT_EQ(per_rank.cross_node, 3);
  EXPECT_EQ(moved_experts(from, from, 2).value().total(), 0);
  EXPECT_FALSE(moved_experts(from, to, 3).ok());
  EXPECT_FALSE(moved_experts(from, from_rows({{0, 1, 2, 3, 4, 5}}, 6, 3), 1).ok());
}

// fuzz/regressions/fuzz_ref_eplb: P = 90000 slots of E = 4 experts on R = 2 ranks (22500 replicas each) once
// took minutes (every changed slot scanned every replica of its expert). from = [0, 1, 2, 3, 0, 1, ...],
// to shifts each slot to the next expert: all 90000 slots change, and every expert has replicas on both
// ranks, so every move is on the same rank.
TEST(EplbMetrics, MovedExpertsOfManyReplicasIsLinear) {
  constexpr int kSlots = 90000;
  Rows from(1), to(1);
  for (int slot = 0; slot < kSlots; ++slot) {
    from[0].push_back(slot % 4);
    to[0].push_back((slot + 1) % 4);
  }
  const MoveCounts moved = moved_experts(from_rows(from, 4, 2), from_rows(to, 4, 2), 1).value();
  EXPECT_EQ(moved.same_rank, kSlots);
  EXPECT_EQ(moved.total(), kSlots);
}

// Planned loads [8, 2, 6] -> beta 0.8 (above); next window [2, 2, 12]: r0 = 1 + 2 = 3, r1 = 1 + 12 = 13,
// mean 8, beta 8/13.
TEST(EplbMetrics, PredictedVersusRealized) {
  const Placement p = from_rows({{0, 1, 0, 2}}, 3, 2);
  const BalanceForecast f = predicted_vs_realized(p, {{8, 2, 6}}, {{2, 2, 12}}).value();
  EXPECT_EQ(f.predicted.aggregate, 0.8);
  EXPECT_EQ(f.realized.aggregate, 8.0 / 13.0);
  auto bad = predicted_vs_realized(p, {{8, 2, 6}}, {{2, 2}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "next_weight[0]: expected 3 expert loads, got 2");
}

// E = 3, R = 4 ranks of 2 slots, 2 ranks per node: phy2log [0, 1 | 1, 2 | 2, 1 | 0, 2].
// e0 replicas (slot order): slots 0 (r0), 6 (r3); e1: 1 (r0), 2 (r1), 5 (r2); e2: 3 (r1), 4 (r2), 7 (r3).
TEST(ReplicaRule, HandCases) {
  const Placement p = from_rows({{0, 1, 1, 2, 2, 1, 0, 2}}, 3, 4);
  auto slot = [&](int e, std::int64_t t, int k, int src, ReplicaRule rule) {
    return replica_slot_for(p, Assignment{0, e, t, k, 2, src}, rule, 2).value();
  };
  // Modulo: t = 5, k = 1, K = 2 -> n = 11; e1: 11 mod 3 = 2 -> slot 5; e0: 11 mod 2 = 1 -> slot 6.
  EXPECT_EQ(slot(1, 5, 1, 0, ReplicaRule::kModulo), 5);
  EXPECT_EQ(slot(0, 5, 1, 0, ReplicaRule::kModulo), 6);
  EXPECT_EQ(slot(2, 0, 0, 0, ReplicaRule::kModulo), 3);  // n = 0 -> replica 0
  // Local first: same rank, then same node, then modulo.
  EXPECT_EQ(slot(1, 5, 1, 1, ReplicaRule::kLocalFirst), 2);  // e1 on r1 itself
  EXPECT_EQ(slot(0, 5, 1, 1, ReplicaRule::kLocalFirst), 0);  // e0 not on r1; node 0 has slot 0
  EXPECT_EQ(slot(0, 5, 1, 2, ReplicaRule::kLocalFirst), 6);  // node 1 (r2, r3) has slot 6
  EXPECT_EQ(slot(2, 5, 1, 0, ReplicaRule::kLocalFirst), 3);  // node 0: slot 3 on r1
  // Two replicas of e2 on node 1 (slots 4 on r2, 7 on r3) but one is on the source rank: it wins.
  EXPECT_EQ(slot(2, 5, 1, 3, ReplicaRule::kLocalFirst), 7);
}

TEST(ReplicaRule, LocalFirstFallsBackToModuloAcrossNodes) {
  // E = 2, R = 4, 1 slot per rank... needs P >= E: phy2log [0, 0, 0, 1]; e1 only on r3 (node 1).
  const Placement p = from_rows({{0, 0, 0, 1}}, 2, 4);
  // From r0 (node 0 = r0, r1), e1 is neither local nor on the node -> modulo -> its only replica.
  EXPECT_EQ(replica_slot_for(p, Assignment{0, 1, 3, 0, 1, 0}, ReplicaRule::kLocalFirst, 2).value(), 3);
  // e0 from r3: not on r3; node 1 = r2, r3 -> slot 2.
  EXPECT_EQ(replica_slot_for(p, Assignment{0, 0, 3, 0, 1, 3}, ReplicaRule::kLocalFirst, 2).value(), 2);
  // e0 from r2 with local-first: slot 2 regardless of t; with modulo t = 4 -> 4 mod 3 = 1 -> slot 1.
  EXPECT_EQ(replica_slot_for(p, Assignment{0, 0, 4, 0, 1, 2}, ReplicaRule::kLocalFirst, 2).value(), 2);
  EXPECT_EQ(replica_slot_for(p, Assignment{0, 0, 4, 0, 1, 2}, ReplicaRule::kModulo, 2).value(), 1);
}

TEST(ReplicaRule, BadInputsNameTheField) {
  const Placement p = from_rows({{0, 0, 0, 1}}, 2, 4);
  auto k = replica_slot_for(p, Assignment{0, 1, 0, 2, 2, 0}, ReplicaRule::kModulo, 2);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(), "k: must be in [0, 1], got 2");
  auto e = replica_slot_for(p, Assignment{0, 2, 0, 0, 1, 0}, ReplicaRule::kModulo, 2);
  EXPECT_EQ(e.status().message(), "expert: must be in [0, 1], got 2");
  auto rpn = replica_slot_for(p, Assignment{0, 0, 0, 0, 1, 0}, ReplicaRule::kModulo, 3);
  EXPECT_EQ(rpn.status().message(), "ranks_per_node: must be >= 1 and divide num_ranks = 4, got 3");
  EXPECT_EQ(parse_replica_rule("local-first").value(), ReplicaRule::kLocalFirst);
  EXPECT_EQ(parse_replica_rule("nearest").status().message(),
            "replica_rule: must be one of {modulo, local-first}, got \"nearest\"");
}

}  // namespace
}  // namespace eps::eplb
