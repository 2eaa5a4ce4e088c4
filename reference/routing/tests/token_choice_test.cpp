// docs/routing.md 3.1 (token choice) and docs/routing.md 3.2 (capacity and drops).
#include "reference/routing/token_choice.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/numerics/transcendental.hpp"

namespace eps::routing {
namespace {

float sig(float x) { return 1.0f / (1.0f + portable_exp(-x)); }

RoutingInput input_of(const std::vector<float>& logits, std::int64_t t, std::int64_t e, std::int64_t s = 0) {
  RoutingInput in;
  in.logits = logits;
  in.num_tokens = t;
  in.num_experts = e;
  in.seq_len = s == 0 ? t : s;
  return in;
}

std::vector<std::int32_t> experts_of(const Routing& r, std::int64_t t) {
  const auto span = r.experts(t);
  return {span.begin(), span.end()};
}

// Independent oracle (docs/routing.md 3.1): scores in fp32 as the contract writes them, then every candidate
// expert sorted with std::sort on (key descending as double, index ascending).
struct Oracle {
  std::vector<std::int32_t> experts;
  std::vector<float> gates;
};

Oracle oracle_token(const TokenChoiceConfig& c, const float* row, std::int64_t e) {
  std::vector<float> p(e);
  if (c.score == ScoreFunction::kSigmoid) {
    for (std::int64_t i = 0; i < e; ++i) p[i] = sig(row[i]);
  } else {
    float m = row[0];
    for (std::int64_t i = 1; i < e; ++i) m = std::max(m, row[i]);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < e; ++i) sum += portable_exp(row[i] - m);
    for (std::int64_t i = 0; i < e; ++i) p[i] = portable_exp(row[i] - m) / sum;
  }
  std::vector<double> key(e);
  for (std::int64_t i = 0; i < e; ++i) key[i] = c.bias.empty() ? p[i] : static_cast<float>(p[i] + c.bias[i]);
  const auto by_key = [&](int a, int b) { return key[a] > key[b] || (key[a] == key[b] && a < b); };
  std::vector<int> candidates;
  const std::int64_t size = e / c.groups;
  std::vector<int> groups(c.groups);
  std::vector<double> group_key(c.groups);
  for (std::int64_t g = 0; g < c.groups; ++g) {
    std::vector<int> members(size);
    for (std::int64_t i = 0; i < size; ++i) members[i] = static_cast<int>(g * size + i);
    std::sort(members.begin(), members.end(), by_key);
    group_key[g] = size == 1 ? key[members[0]] : static_cast<float>(key[members[0]] + key[members[1]]);
    groups[g] = static_cast<int>(g);
  }
  std::sort(groups.begin(), groups.end(), [&](int a, int b) {
    return group_key[a] > group_key[b] || (group_key[a] == group_key[b] && a < b);
  });
  for (std::int64_t g = 0; g < c.topk_groups; ++g) {
    for (std::int64_t i = 0; i < size; ++i) candidates.push_back(static_cast<int>(groups[g] * size + i));
  }
  std::sort(candidates.begin(), candidates.end(), by_key);
  Oracle o;
  float sum = 0.0f;
  for (std::int64_t k = 0; k < c.k; ++k) sum += p[candidates[k]];
  for (std::int64_t k = 0; k < c.k; ++k) {
    const float pk = p[candidates[k]];
    o.experts.push_back(candidates[k]);
    o.gates.push_back(c.renorm ? (sum == 0.0f ? 0.0f : pk / sum * c.scaling) : pk * c.scaling);
  }
  return o;
}

TEST(TokenChoice, MatchesBruteForceOracleWithManyTies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-8, 8);  // logits on a grid of 0.25: many equal scores
  std::uniform_int_distribution<int> bias_level(-4, 4);
  int configs = 0;
  for (ScoreFunction score : {ScoreFunction::kSoftmax, ScoreFunction::kSigmoid}) {
    for (bool renorm : {false, true}) {
      for (bool with_bias : {false, true}) {
        for (auto [groups, topk_groups, k] : {std::tuple{1, 1, 1}, std::tuple{1, 1, 4}, std::tuple{4, 2, 3},
                                              std::tuple{8, 3, 6}, std::tuple{16, 4, 4}}) {
          const std::int64_t t = 40;
          const std::int64_t e = 16;
          TokenChoiceConfig c;
          c.score = score;
          c.renorm = renorm;
          c.k = k;
          c.groups = groups;
          c.topk_groups = topk_groups;
          c.scaling = renorm ? 2.5f : 1.0f;
          if (with_bias) {
            for (std::int64_t i = 0; i < e; ++i)
              c.bias.push_back(0.125f * static_cast<float>(bias_level(rng)));
          }
          std::vector<float> logits(t * e);
          for (float& v : logits) {
            const int l = level(rng);
            v = l == -8 ? -std::numeric_limits<float>::infinity() : 0.25f * static_cast<float>(l);
          }
          const Result<Routing> r = route_token_choice(c, input_of(logits, t, e));
          ASSERT_TRUE(r.ok()) << r.status().message();
          for (std::int64_t i = 0; i < t; ++i) {
            const Oracle o = oracle_token(c, logits.data() + i * e, e);
            ASSERT_EQ(experts_of(*r, i), o.experts) << "config " << configs << " token " << i;
            const auto gates = r->gates(i);
            ASSERT_EQ(std::vector<float>(gates.begin(), gates.end()), o.gates) << "config " << configs;
          }
          ++configs;
        }
      }
    }
  }
  EXPECT_EQ(configs, 40);
}

TEST(TokenChoice, RenormalizedSoftmaxGatesMatchDouble) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f, 1.25f};
  TokenChoiceConfig c;
  c.k = 2;
  c.renorm = true;
  const Result<Routing> r = route_token_choice(c, input_of(logits, 1, 5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{2, 4}));
  // Renormalized top-2 softmax = softmax over the two logits: 1 / (1 + e^(1.25 − 2)).
  const double g0 = 1.0 / (1.0 + std::exp(-0.75));
  EXPECT_NEAR(r->gates(0)[0], g0, 1e-7);
  EXPECT_NEAR(r->gates(0)[1], 1.0 - g0, 1e-7);
}

TEST(TokenChoice, GroupLimitedHandCase) {
  // All logits 0, so σ = 0.5 and keys = 0.5 + bias exactly:
  //   keys = [1.0, 0.0 | 0.75, 0.75 | 0.875, 0.25 | 0.5, 0.5]   (4 groups of 2 experts)
  //   group keys (top-2 sums) = [1.0, 1.5, 1.125, 1.0]
  // topk_groups 2 keeps groups 1 and 2 (group 0 holds the single largest key but loses);
  // candidates 2, 3, 4, 5 with keys 0.75, 0.75, 0.875, 0.25 -> top-3 slots [4, 2, 3].
  const std::vector<float> logits(8, 0.0f);
  TokenChoiceConfig c;
  c.score = ScoreFunction::kSigmoid;
  c.k = 3;
  c.bias = {0.5f, -0.5f, 0.25f, 0.25f, 0.375f, -0.25f, 0.0f, 0.0f};
  c.groups = 4;
  c.topk_groups = 2;
  c.renorm = true;
  c.scaling = 2.5f;
  Result<Routing> r = route_token_choice(c, input_of(logits, 1, 8));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{4, 2, 3}));
  // Gates ignore the bias: 0.5 / (0.5 + 0.5 + 0.5) · 2.5, in fp32 in that order.
  const float g = (0.5f / 1.5f) * 2.5f;
  for (float gate : r->gates(0)) EXPECT_EQ(gate, g);
  EXPECT_NEAR(g, 2.5 / 3.0, 1e-6);

  // topk_groups 3: groups 0 and 3 tie at 1.0, the lower group (0) wins -> candidates 0..5 -> [0, 4, 2].
  c.topk_groups = 3;
  c.renorm = false;
  r = route_token_choice(c, input_of(logits, 1, 8));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 4, 2}));
  for (float gate : r->gates(0)) EXPECT_EQ(gate, 1.25f);  // 0.5 · 2.5 exactly

  // Without group limit: global top-3 = [0 (1.0), 4 (0.875), 2 (0.75, ties 3 and wins by index)].
  c.groups = 1;
  c.topk_groups = 1;
  r = route_token_choice(c, input_of(logits, 1, 8));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 4, 2}));
}

TEST(TokenChoice, EqualLogitsLowerIndexWins) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 3.0f, 1.0f, 1.0f};
  TokenChoiceConfig c;
  c.k = 4;
  const Result<Routing> r = route_token_choice(c, input_of(logits, 1, 6));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{1, 2, 3, 0}));
}

TEST(TokenChoice, ZeroSelectedScoreSumGivesZeroGates) {
  // exp(-200) underflows to 0 in fp32; the bias selects experts 1 and 2 whose scores are 0.
  const std::vector<float> logits = {0.0f, -200.0f, -200.0f};
  TokenChoiceConfig c;
  c.k = 2;
  c.renorm = true;
  c.bias = {-1.0f, 0.5f, 0.5f};
  const Result<Routing> r = route_token_choice(c, input_of(logits, 1, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(r->gates(0)[0], 0.0f);
  EXPECT_EQ(r->gates(0)[1], 0.0f);
}

TEST(TokenChoice, CapacityFormulasByHand) {
  // megatron: ceil(T·K/E · cf) = ceil(20/4 · 1.25 = 6.25) = 7.
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kMegatron, 10, 2, 4, 1.25), 7);
  // gshard: K · floor(cf · ceil(T/E)) = 2 · floor(1.25 · 3 = 3.75) = 6.
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kGshard, 10, 2, 4, 1.25), 6);
  // cf = 1: megatron 8·2/4 = 4; gshard 2 · floor(ceil(8/4) = 2) = 4.
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kMegatron, 8, 2, 4, 1.0), 4);
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kGshard, 8, 2, 4, 1.0), 4);
  // gshard may give 0: 1 · floor(0.5 · ceil(1/4) = 0.5) = 0.
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kGshard, 1, 1, 4, 0.5), 0);
  // The documented double-arithmetic edge: T·K/E = 200·2/8 = 50 and cf = 1.1 (binary
  // 1.100000000000000088...) give 55.00000000000001 in double, so C = 56 (decimal arithmetic: 55), as
  // Megatron-Core's Python float computation does.
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kMegatron, 200, 2, 8, 1.1), 56);
  EXPECT_EQ(token_choice_capacity(CapacityFormula::kMegatron, 40, 2, 8, 1.1), 11);  // 10 · 1.1 = 11.0
  EXPECT_FALSE(token_choice_capacity(CapacityFormula::kDropless, 10, 2, 4, 1.25).has_value());
}

// Hand case for drops: T = 6, E = 3, K = 2, sigmoid without renorm (gate = σ(logit)); megatron with
// cf = 0.5: C = ceil(6·2/3 · 0.5) = 2. Slots (by logit): t0 [0,1] t1 [1,0] t2 [0,2] t3 [2,1] t4 [0,2]
// t5 [0,1] (t5 all equal: lower index first).
struct DropCase {
  std::vector<float> logits = {2, 1, 0, 1, 2, 0, 3, 0, 1, 0, 1, 2, 4, 0, 1, 0, 0, 0};
  TokenChoiceConfig config() const {
    TokenChoiceConfig c;
    c.score = ScoreFunction::kSigmoid;
    c.k = 2;
    c.capacity = CapacityFormula::kMegatron;
    c.capacity_factor = 0.5;
    return c;
  }
};

std::vector<std::vector<std::int32_t>> all_experts(const Routing& r) {
  std::vector<std::vector<std::int32_t>> out;
  for (std::int64_t t = 0; t < r.num_tokens; ++t) out.push_back(experts_of(r, t));
  return out;
}

TEST(TokenChoice, DropsByPosition) {
  // First choices in token order: e0 <- t0, t2 (full), e1 <- t1, e2 <- t3; t4 and t5 first choices drop.
  // Second choices: t0 -> e1 (2nd), t1 -> e0 full, t2 -> e2 (2nd), t3 -> e1 full, t4 -> e2 full,
  // t5 -> e1 full.
  const DropCase d;
  TokenChoiceConfig c = d.config();
  c.drop = DropPriority::kPosition;
  const Result<Routing> r = route_token_choice(c, input_of(d.logits, 6, 3));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->capacity, std::optional<std::int64_t>(2));
  EXPECT_EQ(all_experts(*r),
            (std::vector<std::vector<std::int32_t>>{{0, 1}, {1, -1}, {0, 2}, {2, -1}, {-1, -1}, {-1, -1}}));
  EXPECT_EQ(r->gates(1)[1], 0.0f);
  EXPECT_EQ(r->gates(0)[1], sig(1.0f));  // kept gates are not renormalized
  EXPECT_EQ(r->dropped_tokens, 2);
  EXPECT_EQ(r->dropped_assignments, 6);
  EXPECT_DOUBLE_EQ(r->drop_ratio, 0.5);  // 6 of 12
  EXPECT_EQ(r->expert_load, (std::vector<std::int64_t>{2, 2, 2}));
  ASSERT_TRUE(r->padding_waste.has_value());
  EXPECT_DOUBLE_EQ(*r->padding_waste, 0.0);  // (3·2 − 6) / 6
}

TEST(TokenChoice, DropsByProbs) {
  // e0 gets t0 σ2, t1 σ1, t2 σ3, t4 σ4, t5 σ0 -> keeps t4, t2.
  // e1 gets t0 σ1, t1 σ2, t3 σ1, t5 σ0 -> keeps t1, then t0 (ties t3, lower token wins).
  // e2 gets t2 σ1, t3 σ2, t4 σ1 -> keeps t3, then t2 (ties t4).
  const DropCase d;
  TokenChoiceConfig c = d.config();
  c.drop = DropPriority::kProbs;
  const Result<Routing> r = route_token_choice(c, input_of(d.logits, 6, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(all_experts(*r),
            (std::vector<std::vector<std::int32_t>>{{-1, 1}, {1, -1}, {0, 2}, {2, -1}, {0, -1}, {-1, -1}}));
  EXPECT_EQ(r->gates(4)[0], sig(4.0f));
  EXPECT_EQ(r->gates(4)[1], 0.0f);
  EXPECT_EQ(r->dropped_tokens, 1);
  EXPECT_EQ(r->dropped_assignments, 6);
  EXPECT_EQ(r->expert_load, (std::vector<std::int64_t>{2, 2, 2}));
}

TEST(TokenChoice, PaddingWasteWithSpareCapacity) {
  // gshard cf 2: C = 2 · floor(2 · ceil(6/3) = 4) = 8 per expert; 12 kept of 24 slots -> waste 0.5.
  const DropCase d;
  TokenChoiceConfig c = d.config();
  c.capacity = CapacityFormula::kGshard;
  c.capacity_factor = 2.0;
  const Result<Routing> r = route_token_choice(c, input_of(d.logits, 6, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity, std::optional<std::int64_t>(8));
  EXPECT_EQ(r->dropped_assignments, 0);
  EXPECT_DOUBLE_EQ(*r->padding_waste, 0.5);
  // Loads by hand from the slot list above: e0: t0 t1 t2 t4 t5 = 5, e1: t0 t1 t3 t5 = 4, e2: t2 t3 t4 = 3.
  EXPECT_EQ(r->expert_load, (std::vector<std::int64_t>{5, 4, 3}));
}

TEST(TokenChoice, DroplessStatistics) {
  const DropCase d;
  TokenChoiceConfig c = d.config();
  c.capacity = CapacityFormula::kDropless;
  const Result<Routing> r = route_token_choice(c, input_of(d.logits, 6, 3, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->capacity.has_value());
  EXPECT_FALSE(r->padding_waste.has_value());
  EXPECT_EQ(r->k_per_sample, (std::vector<std::int64_t>{2, 2}));
  EXPECT_TRUE(r->capacity_per_sample.empty());
  EXPECT_EQ(r->compute_cost, 12);
  EXPECT_EQ(r->static_cost, 12);
  EXPECT_DOUBLE_EQ(r->drop_ratio, 0.0);
}

TEST(TokenChoice, ConfigErrors) {
  TokenChoiceConfig c;
  c.k = 9;
  EXPECT_EQ(validate_token_choice(c, 8, "router.").message(), "router.k: must be in [1, 8], got 9");
  c.k = 0;
  EXPECT_EQ(validate_token_choice(c, 8).message(), "k: must be in [1, 8], got 0");
  c.k = 2;
  c.groups = 3;
  EXPECT_EQ(validate_token_choice(c, 8).message(), "groups: must divide E = 8, got 3");
  c.groups = 4;
  c.topk_groups = 5;
  EXPECT_EQ(validate_token_choice(c, 8).message(), "topk_groups: must be in [1, 4], got 5");
  c.topk_groups = 1;
  c.k = 3;
  EXPECT_EQ(validate_token_choice(c, 8).message(),
            "k: must be <= topk_groups·E/groups = 2 candidate experts, got 3");
  c = TokenChoiceConfig{};
  c.bias = {0.0f, 1.0f};
  EXPECT_EQ(validate_token_choice(c, 8, "router.").message(), "router.bias: expected E = 8 values, got 2");
  c.bias = std::vector<float>(8, 0.0f);
  c.bias[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(validate_token_choice(c, 8).message(), "bias[3]: must be finite, got inf");
  c = TokenChoiceConfig{};
  c.capacity = CapacityFormula::kMegatron;
  c.capacity_factor = 0.0;
  EXPECT_EQ(validate_token_choice(c, 8).message(), "cf: must be in (0, 1e6], got 0");
}

TEST(TokenChoice, InputErrors) {
  TokenChoiceConfig c;
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(route_token_choice(c, input_of(logits, 2, 2)).status().message(),
            "logits[1][1]: NaN is not allowed (docs/numerics.md 1.3)");
  logits[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(route_token_choice(c, input_of(logits, 2, 2)).status().message(),
            "logits[1][1]: +inf is not allowed (only -inf, docs/numerics.md 1.3)");
  logits[3] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(route_token_choice(c, input_of(logits, 2, 2)).ok());
  c.k = 3;
  EXPECT_EQ(route_token_choice(c, input_of(logits, 2, 2)).status().message(), "k: must be in [1, 2], got 3");
}

}  // namespace
}  // namespace eps::routing
