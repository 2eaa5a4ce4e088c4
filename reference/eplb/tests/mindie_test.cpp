// docs/eplb.md 8.3: mindie-a2a, mindie-ag and mindie-ex on hand cases and random loads.
#include <random>

#include <gtest/gtest.h>

#include "reference/eplb/policy.hpp"
#include "reference/eplb/tests/test_util.hpp"

namespace eps::eplb {
namespace {

using Rows = std::vector<std::vector<int>>;

EplbPlan plan(const std::string& policy, const EplbProblem& problem) {
  auto result = find_eplb_policy(policy).value()->plan(problem);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : EplbPlan{};
}

// A2A, R = 2, E = 4, P = 6 (3 slots per rank), costs 1 / 10 (gain factor 9).
// traffic r0 = [10, 0, 3, 1], r1 = [0, 8, 4, 2]; demand = [10, 8, 7, 3].
// Phase 1 (fewest used slots, ties lowest rank): e0->r0, e1->r1, e2->r0, e3->r1.
// Phase 2: gains (e0,r1) 0, (e1,r0) 0, (e2,r1) 4*9 = 36, (e3,r0) 1*9 = 9 -> e2 to r1 (now full);
//          then (e3,r0) 9 -> e3 to r0.
TEST(MindieA2A, LocalityHandCase) {
  EplbProblem p;
  p.weight = {{10, 8, 7, 3}};
  p.traffic = {{{10, 0, 3, 1}, {0, 8, 4, 2}}};
  p.num_replicas = 6;
  p.num_ranks = 2;
  EXPECT_EQ(phy2log_rows(plan("mindie-a2a", p).placement), (Rows{{0, 2, 3, 1, 3, 2}}));
}

// A2A completion, R = 2, E = 5, P = 8 (4 slots per rank); traffic r0 = [6, 0, 0, 0, 0], r1 = [0, 0, 0, 0, 9].
// Phase 1 by demand [6, 0, 0, 0, 9]: e4->r0, e0->r1, e1->r0, e2->r1, e3->r0.
// Phase 2: (e4,r1) 81 > (e0,r0) 54 -> e4 to r1; then e0 to r0 (r0 full); rank 1 lacks e1, e3 with zero
// traffic, so no positive gain remains. Completion: r1 takes the missing expert with the largest
// demand/cnt: e1 and e3 both 0 -> lowest, e1.
TEST(MindieA2A, FreeSlotsAreCompleted) {
  EplbProblem p;
  p.weight = {{6, 0, 0, 0, 9}};
  p.traffic = {{{6, 0, 0, 0, 0}, {0, 0, 0, 0, 9}}};
  p.num_replicas = 8;
  p.num_ranks = 2;
  EXPECT_EQ(phy2log_rows(plan("mindie-a2a", p).placement), (Rows{{4, 1, 3, 0, 0, 2, 4, 1}}));
}

// AG, R = 2, E = 3, P = 4, loads [9, 3, 3].
// Phase 1: e0->r0, e1->r1, e2->r0 (tie in used slots -> r0). Loads r0 = 12, r1 = 3.
// Phase 2 (only r1 has room): +e0 -> r1 = 3 + 4.5, r0 = 12 - 9 + 4.5 -> max 7.5 (gain 4.5);
//                              +e2 -> r1 = 4.5, r0 = 10.5 (gain 1.5). Take e0 -> both ranks 7.5.
TEST(MindieAG, MinMaxHandCase) {
  EplbProblem p;
  p.weight = {{9, 3, 3}};
  p.num_replicas = 4;
  p.num_ranks = 2;
  const Placement placement = plan("mindie-ag", p).placement;
  EXPECT_EQ(phy2log_rows(placement), (Rows{{0, 2, 1, 0}}));
  EXPECT_EQ(testing::max_rank_load(placement, 0, p.weight[0]), 7.5);
}

// AG with no strictly improving replica: loads [4, 4, 4, 4], R = 2, 3 slots per rank. Phase 1 gives
// r0 = [0, 2], r1 = [1, 3], 8 each; any replica raises its rank to 10 -> none taken. Completion: r0 takes
// e1 (4/1, lowest of e1, e3), r1 takes e0 (4/1, lowest of e0, e2).
TEST(MindieAG, EqualLoadsUseCompletion) {
  EplbProblem p;
  p.weight = {{4, 4, 4, 4}};
  p.num_replicas = 6;
  p.num_ranks = 2;
  EXPECT_EQ(phy2log_rows(plan("mindie-ag", p).placement), (Rows{{0, 2, 1, 1, 3, 0}}));
}

// EX hand case: current = identity [0, 1 | 2, 3], loads [10, 8, 1, 1].
// Round 1: r0 = 18, r1 = 2, gap 16, half 8. Pairs (a, b): w_a - w_b = 9, 9, 7, 7; |. - 8| = 1 for all ->
// lowest flat index (0, 0): swap e0 <-> e2; new gap |16 - 18| = 2 < 16 -> taken. Loads r0 9, r1 11.
// Round 2: hi = r1 (slots 2, 3 = e0 10, e3 1), lo = r0 (e2 1, e1 8), gap 2, half 1. Costs: (0,0) |9-1| = 8,
// (0,1) |2-1| = 1, (1,0) |0-1| = 1, (1,1) |-7-1| = 8 -> flat index 1 wins: e0 <-> e1, new gap |2 - 4| = 2,
// not narrower -> stop.
TEST(MindieEX, SwapHandCase) {
  EplbProblem p;
  p.weight = {{10, 8, 1, 1}};
  p.num_replicas = 4;
  p.num_ranks = 2;
  p.max_move = 5;
  const EplbPlan result = plan("mindie-ex", p);
  EXPECT_EQ(phy2log_rows(result.placement), (Rows{{2, 1, 0, 3}}));
  EXPECT_EQ(result.slot_permutation, (Rows{{2, 1, 0, 3}}));
  p.max_move = 0;
  EXPECT_EQ(phy2log_rows(plan("mindie-ex", p).placement), (Rows{{0, 1, 2, 3}}));
  p.max_move = 5;
  p.threshold = 17;  // gap 16 < 17: already balanced enough
  EXPECT_EQ(phy2log_rows(plan("mindie-ex", p).placement), (Rows{{0, 1, 2, 3}}));
}

// Random current placements (deepseek plans of other loads): at most max_move swaps, each swap changes
// two slots; the max rank load never increases; new slot s holds the old slot perm[s], which is exactly
// the all-gather EP product scores · M with M[perm[s]][s] = 1.
TEST(MindieEX, RespectsMaxMoveAndNeverRaisesTheMax) {
  const EplbPolicy& deepseek = *find_eplb_policy("deepseek").value();
  for (std::uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    EplbProblem p;
    p.weight = testing::random_loads(rng, 2, 16);
    p.num_replicas = 24;
    p.num_groups = 4;
    p.num_nodes = 2;
    p.num_ranks = 4;
    p.current = deepseek.plan(p).value().placement;
    p.weight = testing::random_loads(rng, 2, 16);
    p.max_move = static_cast<int>(seed % 4);
    const EplbPlan result = plan("mindie-ex", p);
    for (int l = 0; l < 2; ++l) {
      const auto& perm = result.slot_permutation[l];
      int moved = 0;
      for (int s = 0; s < 24; ++s) {
        moved += perm[s] != s;
        EXPECT_EQ(result.placement.slot_expert(l, s), p.current->slot_expert(l, perm[s]));
      }
      EXPECT_LE(moved, 2 * p.max_move);
      EXPECT_LE(testing::max_rank_load(result.placement, l, p.weight[l]),
                testing::max_rank_load(*p.current, l, p.weight[l]) * (1 + 1e-12));
    }
  }
}

// Integer loads, one replica each: every rank load is an exact integer, so the check is exact.
TEST(MindieEX, ExactMaxNeverIncreasesAndSwapsStayWithinBudget) {
  for (std::uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(1000 + seed);
    EplbProblem p;
    p.weight = testing::random_loads(rng, 1, 12);
    p.num_replicas = 12;
    p.num_ranks = 4;
    const Placement before = find_eplb_policy("static").value()->plan(p).value().placement;
    double previous = testing::max_rank_load(before, 0, p.weight[0]);
    for (int max_move = 1; max_move <= 4; ++max_move) {
      p.max_move = max_move;
      const EplbPlan result = plan("mindie-ex", p);
      const double now = testing::max_rank_load(result.placement, 0, p.weight[0]);
      EXPECT_LE(now, previous);  // each extra round can only keep or lower the max
      previous = now;
      int moved = 0;
      for (int s = 0; s < 12; ++s) moved += result.slot_permutation[0][s] != s;
      EXPECT_LE(moved, 2 * max_move);
    }
  }
}

}  // namespace
}  // namespace eps::eplb
