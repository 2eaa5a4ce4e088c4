// Router input validation, the fixed [T, K] dispatch form (docs/dispatch.md 5) and the RouterConfig entry
// point.
#include "reference/routing/routing.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "reference/routing/router.hpp"

namespace eps::routing {
namespace {

RoutingInput input_of(const std::vector<float>& logits, std::int64_t t, std::int64_t e, std::int64_t s) {
  RoutingInput in;
  in.logits = logits;
  in.num_tokens = t;
  in.num_experts = e;
  in.seq_len = s;
  return in;
}

TEST(RoutingInput, Errors) {
  const std::vector<float> logits(6, 0.0f);
  EXPECT_EQ(validate_routing_input(input_of({}, 0, 3, 1)).message(),
            "logits: need at least one token (T >= 1), got T = 0");
  EXPECT_EQ(validate_routing_input(input_of({}, 2, 0, 1)).message(),
            "logits: need at least one expert (E >= 1), got E = 0");
  EXPECT_EQ(validate_routing_input(input_of(logits, 2, 4, 1)).message(),
            "logits: expected T·E = 2·4 = 8 values, got 6");
  EXPECT_EQ(validate_routing_input(input_of(logits, 2, 3, 0)).message(), "seq_len: must be in [1, 2], got 0");
  EXPECT_EQ(validate_routing_input(input_of(logits, 2, 3, 3)).message(), "seq_len: must be in [1, 2], got 3");
  EXPECT_TRUE(validate_routing_input(input_of(logits, 2, 3, 1)).ok());
  EXPECT_EQ(input_of(logits, 2, 3, 1).num_samples(), 2);
}

TEST(FixedTopk, ExpertChoicePadsWithMinusOne) {
  // S = 2, E = 2, k = 1 -> c = 1: both experts pick token 0 ([4, 4] beats [1, 1]); token 1 is dropped.
  const std::vector<float> logits = {4, 4, 1, 1};
  ExpertChoiceConfig c;
  c.k_schedule.k = 1;
  const Result<Routing> r = route(c, input_of(logits, 2, 2, 2));
  ASSERT_TRUE(r.ok()) << r.status().message();
  Result<FixedTopk> fixed = to_fixed_topk(*r);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->width, 2);
  EXPECT_EQ(fixed->topk_idx, (std::vector<std::int32_t>{0, 1, -1, -1}));
  // Gates: equal logits -> 1 / (1 + 1 + 1e-20) = 0.5.
  EXPECT_EQ(fixed->topk_weights, (std::vector<float>{0.5f, 0.5f, 0.0f, 0.0f}));
  fixed = to_fixed_topk(*r, 3);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->topk_idx, (std::vector<std::int32_t>{0, 1, -1, -1, -1, -1}));
  EXPECT_EQ(to_fixed_topk(*r, 1).status().message(), "width: token 0 has 2 slots, more than width 1");
}

TEST(FixedTopk, TokenChoiceKeepsSlotOrder) {
  const std::vector<float> logits = {0, 3, 1, 2, 2, 0};
  TokenChoiceConfig c;
  c.k = 2;
  const Result<Routing> r = route(c, input_of(logits, 2, 3, 1));
  ASSERT_TRUE(r.ok());
  const Result<FixedTopk> fixed = to_fixed_topk(*r);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->width, 2);
  EXPECT_EQ(fixed->topk_idx, (std::vector<std::int32_t>{1, 2, 0, 1}));  // token 1: 2 = 2, lower index first
}

TEST(Router, ValidateDispatchesOnTheVariant) {
  RouterConfig tc = TokenChoiceConfig{};
  std::get<TokenChoiceConfig>(tc).k = 0;
  EXPECT_EQ(validate_router(tc, 8, "router.").message(), "router.k: must be in [1, 8], got 0");
  ExpertChoiceConfig ec;
  ec.k_schedule.k = 9;
  EXPECT_EQ(validate_router(ec, 8, "router.").message(), "router.k: must be in [1, 8], got 9");
}

// A given routing (a trace): slots as given, -1 kept as a gate-0 slot, statistics counted by hand here.
TEST(RoutingFromTopk, KeepsTheSlotsAndCountsByHand) {
  const std::vector<std::int32_t> idx = {2, -1, 0, 1, -1, -1, 3, 2};
  const std::vector<float> w = {0.5f, 9.0f, 0.25f, 0.75f, 1.0f, 1.0f, 0.125f, 0.375f};
  const Routing r = routing_from_topk(idx, w, 4, 4, 2, 2).value();
  EXPECT_EQ(r.slot_expert, idx);
  EXPECT_EQ(r.slot_gate, (std::vector<float>{0.5f, 0.0f, 0.25f, 0.75f, 0.0f, 0.0f, 0.125f, 0.375f}));
  EXPECT_EQ(r.slot_begin, (std::vector<std::int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(r.expert_load, (std::vector<std::int64_t>{1, 1, 2, 1}));
  EXPECT_EQ(r.dropped_assignments, 3);
  EXPECT_EQ(r.dropped_tokens, 1);
  EXPECT_DOUBLE_EQ(r.drop_ratio, 3.0 / 8.0);
  EXPECT_EQ(r.k_per_sample, (std::vector<std::int64_t>{2, 2}));
  EXPECT_FALSE(r.capacity.has_value());
}

TEST(RoutingFromTopk, ErrorsNameTheSlot) {
  const std::vector<float> w(4, 1.0f);
  EXPECT_EQ(routing_from_topk(std::vector<std::int32_t>{0, 4, 1, 2}, w, 2, 4, 2, 1).status().message(),
            "topk_idx[0][1]: must be in [-1, 3], got 4");
  EXPECT_EQ(routing_from_topk(std::vector<std::int32_t>{0, 1, 2, 2}, w, 2, 4, 2, 1).status().message(),
            "topk_idx[1][1]: expert 2 appears twice in token 1");
  EXPECT_EQ(routing_from_topk(std::vector<std::int32_t>{0, 1, 2}, w, 2, 4, 2, 1).status().message(),
            "topk_idx: expected T·K = 2·2 ids and weights, got 3 and 4");
  EXPECT_EQ(routing_from_topk(std::vector<std::int32_t>{0, 1, 2, 3}, w, 2, 4, 2, 4).status().message(),
            "seq_len: T = 2 tokens is not a multiple of seq_len 4");
}

}  // namespace
}  // namespace eps::routing
