// Input validation (docs/dispatch.md 5, docs/errors.md 10) and expert placement (docs/eplb.md 8.1,
// docs/eplb.md 8.4).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

using testing::routing;

DispatchConfig small_config() {
  return DispatchConfig{.num_ranks = 2, .num_experts = 4, .top_k = 2, .hidden = 8, .max_tokens_per_rank = 2};
}

std::string make_error(const DispatchConfig& config, std::vector<RankRouting> r) {
  const auto plan = DispatchPlan::make(config, std::move(r));
  EXPECT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  return plan.status().message();
}

std::vector<RankRouting> valid_routing() {
  return {routing(1, {0, 3}, {1, 1}), routing(2, {1, -1, 2, 3}, {1, 1, 1, 1})};
}

TEST(DispatchPlanValidation, AcceptsValidInput) {
  EXPECT_TRUE(DispatchPlan::make(small_config(), valid_routing()).ok());
}

TEST(DispatchPlanValidation, Shapes) {
  DispatchConfig c = small_config();
  c.num_ranks = 0;
  EXPECT_EQ(make_error(c, {}), "num_ranks: must be in [1, 1024], got 0");
  c = small_config();
  c.num_experts = 5;
  EXPECT_EQ(make_error(c, valid_routing()), "num_experts: must be a multiple of num_ranks (2), got 5");
  c = small_config();
  c.top_k = 0;
  EXPECT_EQ(make_error(c, valid_routing()), "top_k: must be in [1, 64], got 0");
  c = small_config();
  c.hidden = 0;
  EXPECT_EQ(make_error(c, valid_routing()), "hidden: must be in [1, 1048576], got 0");
  c = small_config();
  c.dtype = PayloadType::kFp8;
  c.hidden = 200;
  EXPECT_EQ(make_error(c, valid_routing()),
            "hidden: must be a multiple of 128 for fp8 payloads (docs/numerics.md 1.2), got 200");
  c = small_config();
  c.expert_alignment = 0;
  EXPECT_EQ(make_error(c, valid_routing()), "expert_alignment: must be in [1, 1048576], got 0");
  c = small_config();
  c.max_tokens_per_rank = -1;
  EXPECT_EQ(make_error(c, valid_routing()), "max_tokens_per_rank: must be in [0, 1048576], got -1");
  EXPECT_EQ(make_error(small_config(), {routing(0, {}, {})}),
            "routing: must have one entry per rank (2), got 1");
}

TEST(DispatchPlanValidation, TokensBeyondTmaxAreAnError) {
  std::vector<RankRouting> r = valid_routing();
  r[1] = routing(3, {0, 1, 0, 1, 0, 1}, {1, 1, 1, 1, 1, 1});
  EXPECT_EQ(make_error(small_config(), r), "routing[1].num_tokens: must be in [0, 2], got 3");
}

TEST(DispatchPlanValidation, RoutingSizes) {
  std::vector<RankRouting> r = valid_routing();
  r[0].topk_idx.push_back(1);
  EXPECT_EQ(make_error(small_config(), r), "routing[0].topk_idx: size must be num_tokens * top_k = 2, got 3");
  r = valid_routing();
  r[1].topk_weights.pop_back();
  EXPECT_EQ(make_error(small_config(), r),
            "routing[1].topk_weights: size must be num_tokens * top_k = 4, got 3");
}

TEST(DispatchPlanValidation, ExpertIds) {
  std::vector<RankRouting> r = valid_routing();
  r[1].topk_idx[3] = 4;
  EXPECT_EQ(make_error(small_config(), r), "routing[1].topk_idx[1][1]: must be in [-1, 3], got 4");
  r[1].topk_idx[3] = -2;
  EXPECT_EQ(make_error(small_config(), r), "routing[1].topk_idx[1][1]: must be in [-1, 3], got -2");
}

TEST(DispatchPlanValidation, DuplicateExpertInOneToken) {
  std::vector<RankRouting> r = valid_routing();
  r[0].topk_idx = {3, 3};
  EXPECT_EQ(
      make_error(small_config(), r),
      "routing[0].topk_idx[0]: expert 3 appears in slots 0 and 1; the experts of one token must be distinct");
  // Repeated -1 is fine: masked slots are not experts.
  r[0].topk_idx = {-1, -1};
  EXPECT_TRUE(DispatchPlan::make(small_config(), r).ok());
}

TEST(DispatchPlanValidation, NanWeightOnlyMattersOnValidSlots) {
  std::vector<RankRouting> r = valid_routing();
  r[1].topk_weights[1] = std::numeric_limits<float>::quiet_NaN();  // slot (1, 0, 1) is masked
  EXPECT_TRUE(DispatchPlan::make(small_config(), r).ok());
  r[1].topk_weights[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(make_error(small_config(), r), "routing[1].topk_weights[1][0]: must not be NaN on a valid slot");
}

TEST(DispatchPlanValidation, RankArgumentOfEveryLayout) {
  const DispatchPlan plan = value_or_throw(DispatchPlan::make(small_config(), valid_routing()));
  testing::HashRowSource source(plan.row_bytes(), 0);
  EXPECT_EQ(rank_major_index(plan, 2).status().message(), "rank: must be in [0, 1], got 2");
  EXPECT_EQ(expert_major_index(plan, -1).status().message(), "rank: must be in [0, 1], got -1");
  EXPECT_EQ(ll_index(plan, 2).status().message(), "rank: must be in [0, 1], got 2");
  EXPECT_FALSE(expected_ll(plan, 5, source).ok());
}

TEST(ExpertMap, DefaultPlacement) {
  const ExpertMap map = value_or_throw(ExpertMap::make_default(3, 6));
  EXPECT_FALSE(map.replicated());
  EXPECT_EQ(map.slots_per_rank(), 2);
  // e / L, e % L with L = 2.
  EXPECT_EQ(map.place(0, 7, 1, 4), (SlotPlacement{0, 0}));
  EXPECT_EQ(map.place(3, 0, 0, 4), (SlotPlacement{1, 1}));
  EXPECT_EQ(map.place(4, 9, 3, 4), (SlotPlacement{2, 0}));
  EXPECT_EQ(ExpertMap::make_default(4, 6).status().message(),
            "num_experts: must be a multiple of num_ranks (4), got 6");
  EXPECT_EQ(ExpertMap::make_default(1, 0).status().message(), "num_experts: must be in [1, 65536], got 0");
}

TEST(ExpertMap, ReplicatedPlacementErrors) {
  const std::vector<int> odd{0, 1, 2};
  EXPECT_EQ(ExpertMap::make_replicated(2, 3, odd).status().message(),
            "phy2log: size must be a positive multiple of num_ranks (2), got 3");
  const std::vector<int> out{0, 1, 3, 2};
  EXPECT_EQ(ExpertMap::make_replicated(2, 3, out).status().message(), "phy2log[2]: must be in [0, 2], got 3");
  const std::vector<int> missing{0, 1, 1, 0};
  EXPECT_EQ(ExpertMap::make_replicated(2, 3, missing).status().message(),
            "phy2log: expert 2 has no replica; every expert needs at least one (docs/eplb.md 8.1)");
  DispatchConfig c = small_config();
  const ExpertMap four_ranks = value_or_throw(ExpertMap::make_default(4, 4));
  EXPECT_EQ(DispatchPlan::make(c, valid_routing(), four_ranks).status().message(),
            "placement.num_ranks: must equal num_ranks (2), got 4");
}

TEST(ExpertMap, ReplicaDispatchRule) {
  // R = 2, E = 3, P = 6 (3 slots per rank): phy2log [2, 0, 1, 0, 2, 0].
  // Expert 0 replicas at slots 1, 3, 5 -> (rank 0, local 1), (rank 1, local 0), (rank 1, local 2).
  // Expert 1 at slot 2 only; expert 2 at slots 0, 4 -> (0, 0), (1, 1).
  const std::vector<int> phy2log{2, 0, 1, 0, 2, 0};
  const ExpertMap map = value_or_throw(ExpertMap::make_replicated(2, 3, phy2log));
  EXPECT_TRUE(map.replicated());
  EXPECT_EQ(std::vector<int>(map.replicas(0).begin(), map.replicas(0).end()), (std::vector<int>{1, 3, 5}));
  // K = 2: replica (t·2 + k) mod cnt.
  EXPECT_EQ(map.place(0, 0, 0, 2), (SlotPlacement{0, 1}));  // 0 mod 3 = 0 -> slot 1
  EXPECT_EQ(map.place(0, 0, 1, 2), (SlotPlacement{1, 0}));  // 1 mod 3 = 1 -> slot 3
  EXPECT_EQ(map.place(0, 1, 0, 2), (SlotPlacement{1, 2}));  // 2 mod 3 = 2 -> slot 5
  EXPECT_EQ(map.place(0, 1, 1, 2), (SlotPlacement{0, 1}));  // 3 mod 3 = 0 -> slot 1
  EXPECT_EQ(map.place(2, 1, 1, 2), (SlotPlacement{1, 1}));  // 3 mod 2 = 1 -> slot 4
  EXPECT_EQ(map.place(1, 5, 1, 2), (SlotPlacement{0, 2}));  // single replica
}

TEST(ExpertMap, ReplicaRoutingThroughTheLayouts) {
  // Same placement as ReplicaDispatchRule. Rank 0 tokens (K = 2):
  //   t0 [0, 2]: e0 replica 0 -> (0, 1); e2 replica 1 mod 2 = 1 -> (1, 1)     dst {0, 1}
  //   t1 [0, 1]: e0 replica 2 -> (1, 2); e1 -> (0, 2)                          dst {0, 1}
  // Rank 1 tokens:
  //   t0 [2, -1]: e2 replica 0 -> (0, 0)                                       dst {0}
  const std::vector<int> phy2log{2, 0, 1, 0, 2, 0};
  const ExpertMap map = value_or_throw(ExpertMap::make_replicated(2, 3, phy2log));
  DispatchConfig config{.num_ranks = 2, .num_experts = 3, .top_k = 2, .hidden = 2, .max_tokens_per_rank = 2};
  const DispatchPlan plan = value_or_throw(
      DispatchPlan::make(config, {routing(2, {0, 2, 0, 1}, {1, 2, 3, 4}), routing(1, {2, -1}, {5, 6})}, map));
  EXPECT_EQ(plan.num_local_experts(), 3);
  // Per physical slot counts on rank 0: slot 1 (t0), 2 (t1), 4 (t0), 5 (t1).
  EXPECT_EQ(value_or_throw(expected_layout(plan, 0)).num_tokens_per_expert,
            (std::vector<int>{0, 1, 1, 0, 1, 1}));
  const RankMajorIndex q1 = value_or_throw(rank_major_index(plan, 1));
  EXPECT_EQ(q1.sources, (std::vector<SourceToken>{{0, 0}, {0, 1}}));
  EXPECT_EQ(q1.recv_topk_idx, (std::vector<int>{-1, 1, 2, -1}));
  EXPECT_EQ(q1.recv_topk_weights, (std::vector<float>{0, 2, 3, 0}));
  EXPECT_EQ(q1.num_recv_tokens_per_expert, (std::vector<int>{0, 1, 1}));
  const LlIndex ll0 = value_or_throw(ll_index(plan, 0));
  // Rank 0 local 0 (slot 0, e2): r1 t0; local 1 (slot 1, e0): r0 t0; local 2 (slot 2, e1): r0 t1.
  EXPECT_EQ(ll0.packed_recv_count, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(ll0.layout_range, (std::vector<LlRange>{{0, 0}, {0, 1}, {0, 1}, {1, 0}, {0, 1}, {1, 0}}));
}

}  // namespace
}  // namespace eps::dispatch
