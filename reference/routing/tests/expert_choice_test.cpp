// docs/routing.md 3.3 (expert choice, EC-DLM semantics) and docs/routing.md 3.4 (per-sample k in expert
// choice).
#include "reference/routing/expert_choice.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/numerics/transcendental.hpp"

namespace eps::routing {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

RoutingInput input_of(const std::vector<float>& logits, std::int64_t t, std::int64_t e, std::int64_t s,
                      const std::vector<float>& mask_ratio = {}) {
  RoutingInput in;
  in.logits = logits;
  in.num_tokens = t;
  in.num_experts = e;
  in.seq_len = s;
  in.mask_ratio = mask_ratio;
  return in;
}

ExpertChoiceConfig static_config(std::int64_t k) {
  ExpertChoiceConfig c;
  c.k_schedule.k = k;
  return c;
}

std::vector<std::int32_t> experts_of(const Routing& r, std::int64_t t) {
  const auto span = r.experts(t);
  return {span.begin(), span.end()};
}

std::vector<float> gates_of(const Routing& r, std::int64_t t) {
  const auto span = r.gates(t);
  return {span.begin(), span.end()};
}

// Brute-force oracle of docs/routing.md 3.3 selection: per sample and expert, std::sort the sample's
// positions on (logit descending as double, position ascending) and take the first c_b; returns J_i per
// token.
std::vector<std::vector<std::int32_t>> oracle_sets(const std::vector<float>& logits, std::int64_t t,
                                                   std::int64_t e, std::int64_t s,
                                                   const std::vector<std::int64_t>& c) {
  std::vector<std::vector<std::int32_t>> sets(t);
  for (std::int64_t b = 0; b < t / s; ++b) {
    for (std::int64_t j = 0; j < e; ++j) {
      std::vector<std::int64_t> pos(s);
      for (std::int64_t i = 0; i < s; ++i) pos[i] = b * s + i;
      std::sort(pos.begin(), pos.end(), [&](std::int64_t x, std::int64_t y) {
        const double lx = logits[x * e + j];
        const double ly = logits[y * e + j];
        return lx > ly || (lx == ly && x < y);
      });
      for (std::int64_t i = 0; i < c[b]; ++i) sets[pos[i]].push_back(static_cast<std::int32_t>(j));
    }
  }
  return sets;
}

TEST(ExpertChoice, HandComputedSequenceCase) {
  // S = 4, E = 4, k = 2 -> c = max(floor(4·2/4), 1) = 2.
  //          e0  e1  e2  e3
  //   p0 = [ 1,  0,  0, -inf]
  //   p1 = [ 1,  2,  0, -inf]
  //   p2 = [ 0,  2,  0,  5  ]
  //   p3 = [-1,  2,  0, -inf]
  // e0 picks p0, p1 (1, 1); e1 picks p1, p2 (2 ties 3 times: lower positions); e2 picks p0, p1 (all 0);
  // e3 picks p2 (5), then p0 (-inf ties: lowest position). J: p0 {0,2,3}, p1 {0,1,2}, p2 {1,3}, p3 {}.
  const std::vector<float> logits = {1, 0, 0, kMinusInf, 1, 2, 0, kMinusInf, 0, 2, 0, 5, -1, 2, 0, kMinusInf};
  ExpertChoiceConfig c = static_config(2);
  c.fscale = {1.0f, 1.0f, 2.0f, 3.0f, 4.0f};  // Fscale[|J_i|]
  const Result<Routing> r = route_expert_choice(c, input_of(logits, 4, 4, 4));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(experts_of(*r, 1), (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(experts_of(*r, 2), (std::vector<std::int32_t>{1, 3}));
  EXPECT_TRUE(experts_of(*r, 3).empty());
  // p0: m = 1, terms [e^0, e^-1, 0], sum = 1 + 0.36787944 = 1.36787944; gates 0.7310586, 0.2689414, 0;
  // |J| = 3 -> ×3: 2.1931758, 0.8068243, 0.
  const std::vector<float> g0 = gates_of(*r, 0);
  EXPECT_NEAR(g0[0], 3.0 * 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(g0[1], 3.0 * std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(g0[2], 0.0f);
  // The same in fp32, the operation order of the contract: d / (Σd + 1e-20f) · Fscale.
  const float e1 = portable_exp(-1.0f);
  const float sum0 = (0.0f + 1.0f) + e1;
  EXPECT_EQ(g0[0], (1.0f / (sum0 + 1e-20f)) * 3.0f);
  EXPECT_EQ(g0[1], (e1 / (sum0 + 1e-20f)) * 3.0f);
  // p1: logits [1, 2, 0], m = 2: [e^-1, 1, e^-2] / 1.50321472, ×3.
  const double s1 = std::exp(-1.0) + 1.0 + std::exp(-2.0);
  const std::vector<float> g1 = gates_of(*r, 1);
  EXPECT_NEAR(g1[0], 3.0 * std::exp(-1.0) / s1, 1e-6);
  EXPECT_NEAR(g1[1], 3.0 / s1, 1e-6);
  EXPECT_NEAR(g1[2], 3.0 * std::exp(-2.0) / s1, 1e-6);
  // p2: logits [2, 5] -> [e^-3, 1] / (1 + e^-3), ×2.
  const std::vector<float> g2 = gates_of(*r, 2);
  EXPECT_NEAR(g2[0], 2.0 * std::exp(-3.0) / (1.0 + std::exp(-3.0)), 1e-6);
  EXPECT_NEAR(g2[1], 2.0 / (1.0 + std::exp(-3.0)), 1e-6);
  EXPECT_EQ(r->expert_load, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(r->dropped_tokens, 1);
  EXPECT_DOUBLE_EQ(r->drop_ratio, 0.25);
  EXPECT_EQ(r->k_per_sample, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{2}));
  EXPECT_FALSE(r->capacity.has_value());
  EXPECT_DOUBLE_EQ(*r->padding_waste, 0.0);
  EXPECT_EQ(r->compute_cost, 8);
  EXPECT_EQ(r->static_cost, 8);
}

TEST(ExpertChoice, SigmoidGates) {
  // S = 2, E = 2, k = 2 -> c = 2: every expert picks both tokens. Token 0: σ(0) = 0.5 and σ(0) = 0.5,
  // g = 0.5 / (1 + 1e-20) = 0.5 exactly. Token 1: σ(2), σ(-inf) = 0 -> gates 1, 0 (1e-20 vanishes).
  const std::vector<float> logits = {0, 0, 2, kMinusInf};
  ExpertChoiceConfig c = static_config(2);
  c.gate = ScoreFunction::kSigmoid;
  const Result<Routing> r = route_expert_choice(c, input_of(logits, 2, 2, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(gates_of(*r, 0), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(gates_of(*r, 1), (std::vector<float>{1.0f, 0.0f}));
}

TEST(ExpertChoice, AllMinusInfinityPicksGiveZeroGates) {
  // S = 2, E = 1, k = 1 -> c = max(floor(2·1/1), 1) = 2: the expert must take both -inf tokens.
  const std::vector<float> logits = {kMinusInf, kMinusInf};
  for (ScoreFunction gate : {ScoreFunction::kSoftmax, ScoreFunction::kSigmoid}) {
    ExpertChoiceConfig c = static_config(1);
    c.gate = gate;
    const Result<Routing> r = route_expert_choice(c, input_of(logits, 2, 1, 2));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0}));
    EXPECT_EQ(gates_of(*r, 0), (std::vector<float>{0.0f}));
    EXPECT_EQ(gates_of(*r, 1), (std::vector<float>{0.0f}));
  }
}

TEST(ExpertChoice, InvariantsAndOracleOnRandomInput) {
  // docs/routing.md 3.3 invariants: every expert gets exactly c_b tokens per sample, Σ_i |J_i| = E·Σ_b c_b.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(-8, 7);  // 16 logit values: many ties
  const std::int64_t s = 64, b = 3, e = 24, t = s * b;
  std::vector<float> logits(t * e);
  for (float& v : logits) v = static_cast<float>(level(rng)) * 0.0625f;
  ExpertChoiceConfig c = static_config(5);
  c.k_schedule.schedule.kind = ScheduleKind::kLinearReverse;
  c.k_schedule.k_min = 2;
  c.k_schedule.k_max = 9;
  const std::vector<float> mask = {0.0f, 0.5f, 1.0f};
  const Result<Routing> r = route_expert_choice(c, input_of(logits, t, e, s, mask));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // k_b = round(2 + 7·(1 − r)): r = 0, 0.5, 1 -> 9, round(5.5) = 6, 2; c_b = floor(64·k_b/24) = 24, 16, 5.
  EXPECT_EQ(r->k_per_sample, (std::vector<std::int64_t>{9, 6, 2}));
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{24, 16, 5}));
  EXPECT_EQ(r->compute_cost, 64 * (9 + 6 + 2));
  EXPECT_EQ(r->static_cost, 3 * 64 * 5);
  const auto expected = oracle_sets(logits, t, e, s, r->capacity_per_sample);
  std::vector<std::vector<std::int64_t>> per_sample_load(b, std::vector<std::int64_t>(e, 0));
  std::int64_t total_slots = 0;
  for (std::int64_t i = 0; i < t; ++i) {
    const auto experts = experts_of(*r, i);
    ASSERT_EQ(experts, expected[i]) << "token " << i;
    ASSERT_TRUE(std::is_sorted(experts.begin(), experts.end()));
    for (std::int32_t j : experts) ++per_sample_load[i / s][j];
    total_slots += static_cast<std::int64_t>(experts.size());
  }
  for (std::int64_t sb = 0; sb < b; ++sb) {
    for (std::int64_t j = 0; j < e; ++j) EXPECT_EQ(per_sample_load[sb][j], r->capacity_per_sample[sb]);
  }
  EXPECT_EQ(total_slots, e * (24 + 16 + 5));
  for (std::int64_t j = 0; j < e; ++j) EXPECT_EQ(r->expert_load[j], 24 + 16 + 5);
  // Gates: fp32 recomputation in the order of the contract and a double cross-check.
  for (std::int64_t i = 0; i < t; ++i) {
    const auto experts = experts_of(*r, i);
    if (experts.empty()) continue;
    float m = kMinusInf;
    for (std::int32_t j : experts) m = std::max(m, logits[i * e + j]);
    float sum = 0.0f;
    for (std::int32_t j : experts) sum += portable_exp(logits[i * e + j] - m);
    double dsum = 0.0;
    for (std::int32_t j : experts) dsum += std::exp(static_cast<double>(logits[i * e + j]) - m);
    const auto gates = gates_of(*r, i);
    for (std::size_t n = 0; n < experts.size(); ++n) {
      const float d = portable_exp(logits[i * e + experts[n]] - m);
      ASSERT_EQ(gates[n], d / (sum + 1e-20f));
      ASSERT_NEAR(gates[n], std::exp(static_cast<double>(logits[i * e + experts[n]]) - m) / dsum, 1e-6);
    }
  }
}

TEST(ExpertChoice, LargeShapeMatchesOracle) {
  // The ec-dlm-owt shape scaled down: S = 512, E = 64, k = 20 -> c = 160; docs/numerics.md 2.2 logits (2^-10
  // grid).
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(-4096, 4095);
  const std::int64_t s = 512, e = 64, t = 2 * s;
  std::vector<float> logits(t * e);
  for (float& v : logits) v = static_cast<float>(level(rng)) / 1024.0f;
  const Result<Routing> r = route_expert_choice(static_config(20), input_of(logits, t, e, s));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{160, 160}));
  const auto expected = oracle_sets(logits, t, e, s, r->capacity_per_sample);
  for (std::int64_t i = 0; i < t; ++i) ASSERT_EQ(experts_of(*r, i), expected[i]) << "token " << i;
}

TEST(ExpertChoice, BatchScopeSelectsAcrossSamples) {
  // B = 2, S = 2, E = 2, k = 1. Batch scope: c = max(floor(2·2·1/2), 1) = 2 over all 4 tokens, so the two
  // high tokens of sample 0 win both experts and sample 1 is dropped. Sequence scope: c_b = 1 per sample.
  const std::vector<float> logits = {3, 3, 2, 2, 1, 1, 0, 0};
  ExpertChoiceConfig c = static_config(1);
  c.scope = CapacityScope::kBatch;
  Result<Routing> r = route_expert_choice(c, input_of(logits, 4, 2, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity, std::optional<std::int64_t>(2));
  EXPECT_TRUE(r->capacity_per_sample.empty());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(experts_of(*r, 1), (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(experts_of(*r, 2).empty());
  EXPECT_TRUE(experts_of(*r, 3).empty());
  EXPECT_EQ(r->dropped_tokens, 2);
  c.scope = CapacityScope::kSequence;
  r = route_expert_choice(c, input_of(logits, 4, 2, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(experts_of(*r, 1).empty());
  EXPECT_EQ(experts_of(*r, 2), (std::vector<std::int32_t>{0, 1}));
}

TEST(ExpertChoice, ScheduledCapacityPerSampleAndBatch) {
  // linear_reverse 1..3, mask ratios [0.25, 1.0]: k = [round(1 + 2·0.75 = 2.5) = 2, 1];
  // S = 4, E = 4: c_b = [floor(4·2/4), max(floor(4·1/4), 1)] = [2, 1]; batch c = floor(2·4·max(2, 1)/4) = 4.
  std::vector<float> logits(8 * 4);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7) % 5);
  ExpertChoiceConfig c = static_config(2);
  c.k_schedule.schedule.kind = ScheduleKind::kLinearReverse;
  c.k_schedule.k_min = 1;
  c.k_schedule.k_max = 3;
  const std::vector<float> mask = {0.25f, 1.0f};
  Result<Routing> r = route_expert_choice(c, input_of(logits, 8, 4, 4, mask));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->k_per_sample, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(r->compute_cost, 12);  // 4·2 + 4·1
  EXPECT_EQ(r->static_cost, 16);   // 2·4·2
  c.scope = CapacityScope::kBatch;
  r = route_expert_choice(c, input_of(logits, 8, 4, 4, mask));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity, std::optional<std::int64_t>(4));
  EXPECT_EQ(r->expert_load, (std::vector<std::int64_t>{4, 4, 4, 4}));
}

TEST(ExpertChoice, BatchScopeCapacityUsesTheLargestPerSampleK) {
  // docs/routing.md 3.3 batch scope with per-sample k: c = max(floor(B·S·max_b k_b / E), 1).
  // B = 3, S = 4, E = 8, linear 1..3, mask ratios [0, 0.5, 1]: k_b = 1 + 2·r = [1, 2, 3] (no ties), so
  //   c = max(floor(3·4·3 / 8), 1) = floor(36 / 8) = 4,
  // where a sum over samples would give floor(4·(1 + 2 + 3) / 8) = 3 and the static k = 2 would give
  // floor(3·4·2 / 8) = 3. Sequence scope: c_b = max(floor(4·k_b / 8), 1) = [1, 1, 1].
  const std::int64_t b = 3, s = 4, e = 8, t = b * s;
  std::vector<float> logits(t * e);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 11) % 7) - 3.0f;
  ExpertChoiceConfig c = static_config(2);
  c.scope = CapacityScope::kBatch;
  c.k_schedule.schedule.kind = ScheduleKind::kLinear;
  c.k_schedule.k_min = 1;
  c.k_schedule.k_max = 3;
  const std::vector<float> mask = {0.0f, 0.5f, 1.0f};
  Result<Routing> r = route_expert_choice(c, input_of(logits, t, e, s, mask));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->k_per_sample, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(r->capacity, std::optional<std::int64_t>(4));
  EXPECT_TRUE(r->capacity_per_sample.empty());
  EXPECT_EQ(r->expert_load, std::vector<std::int64_t>(e, 4));
  // The batch is one selection pass over all B·S tokens: the oracle with one "sample" of t tokens.
  const auto expected = oracle_sets(logits, t, e, t, {4});
  std::int64_t total_slots = 0;
  for (std::int64_t i = 0; i < t; ++i) {
    EXPECT_EQ(experts_of(*r, i), expected[i]) << "token " << i;
    total_slots += r->num_slots(i);
  }
  EXPECT_EQ(total_slots, e * 4);   // Σ_i |J_i| = E·c
  EXPECT_EQ(r->compute_cost, 24);  // Σ_b S·k_b = 4·(1 + 2 + 3)
  c.scope = CapacityScope::kSequence;
  r = route_expert_choice(c, input_of(logits, t, e, s, mask));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{1, 1, 1}));
}

TEST(ExpertChoice, NegativeZeroTiesWithZero) {
  // docs/numerics.md 1.3: -0.0 == +0.0 as keys, so they tie and the lower position wins. E = 3, S = 3, k = 2
  // -> c = floor(3·2/3) = 2. Expert 0 sees [-0.0, +0.0, 1.0]: 1.0 enters and evicts the canonical-last of the
  // tied zeros, position 1, so expert 0 keeps positions 0 and 2.
  const std::vector<float> logits = {-0.0f, 5, 5, 0.0f, 5, 5, 1.0f, 0, 0};
  const Result<Routing> r = route_expert_choice(static_config(2), input_of(logits, 3, 3, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(experts_of(*r, 1), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(experts_of(*r, 2), (std::vector<std::int32_t>{0}));
}

TEST(ExpertChoice, KEqualToEGivesEverySampleToEveryExpert) {
  // k = E: c_b = floor(S·E/E) = S, so every expert takes every token.
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};
  const Result<Routing> r = route_expert_choice(static_config(2), input_of(logits, 3, 2, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capacity_per_sample, (std::vector<std::int64_t>{3}));
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(experts_of(*r, i), (std::vector<std::int32_t>{0, 1}));
}

TEST(ExpertChoice, ZhouSoftmaxSelectsByProbability) {
  // Token a = [1, 1]: P = [0.5, 0.5]. Token b = [2, 5]: P = [e^-3/(1+e^-3) = 0.0474, 0.9526].
  // S = 2, E = 2, k = 1 -> c = 1. By logits (EC-DLM) both experts pick b; by probability expert 0
  // picks a (0.5 > 0.047) and expert 1 picks b.
  const std::vector<float> logits = {1, 1, 2, 5};
  ExpertChoiceConfig c = static_config(1);
  c.variant = ExpertChoiceVariant::kSoftmax;
  Result<Routing> r = route_expert_choice(c, input_of(logits, 2, 2, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(experts_of(*r, 0), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(experts_of(*r, 1), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(gates_of(*r, 0), (std::vector<float>{0.5f}));  // no renormalization over J_i
  EXPECT_NEAR(gates_of(*r, 1)[0], 1.0 / (1.0 + std::exp(-3.0)), 1e-7);
  c.variant = ExpertChoiceVariant::kDlm;
  r = route_expert_choice(c, input_of(logits, 2, 2, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(experts_of(*r, 0).empty());
  EXPECT_EQ(experts_of(*r, 1), (std::vector<std::int32_t>{0, 1}));
}

TEST(ExpertChoice, Errors) {
  const std::vector<float> logits(12, 0.0f);
  ExpertChoiceConfig c = static_config(5);
  EXPECT_EQ(route_expert_choice(c, input_of(logits, 3, 4, 3)).status().message(),
            "k: must be in [1, 4], got 5");
  c = static_config(2);
  EXPECT_EQ(route_expert_choice(c, input_of(logits, 3, 4, 2)).status().message(),
            "seq_len: T = 3 tokens is not a multiple of seq_len 2");
  c.fscale = {1.0f, 1.0f};
  EXPECT_EQ(validate_expert_choice(c, 4, "router.").message(),
            "router.fscale: expected E + 1 = 5 values, got 2");
  c.fscale = {1.0f, 1.0f, 1.0f, std::numeric_limits<float>::infinity(), 1.0f};
  EXPECT_EQ(validate_expert_choice(c, 4).message(), "fscale[3]: must be finite, got inf");
  c.variant = ExpertChoiceVariant::kSoftmax;
  EXPECT_EQ(validate_expert_choice(c, 4).message(),
            "fscale: is not used by ec-softmax (gates are the softmax probabilities)");
  c = static_config(2);
  c.k_schedule.schedule.kind = ScheduleKind::kLinear;
  c.k_schedule.k_min = 1;
  c.k_schedule.k_max = 3;
  EXPECT_EQ(route_expert_choice(c, input_of(logits, 3, 4, 3)).status().message(),
            "mask_ratio: required (B = 1 values in [0, 1]) for schedule \"linear\"");
  const std::vector<float> bad_mask = {1.5f};
  EXPECT_EQ(route_expert_choice(c, input_of(logits, 3, 4, 3, bad_mask)).status().message(),
            "mask_ratio[0]: must be in [0, 1], got 1.5");
  const std::vector<float> two_masks = {0.5f, 0.5f};
  EXPECT_EQ(route_expert_choice(c, input_of(logits, 3, 4, 3, two_masks)).status().message(),
            "mask_ratio: expected B = 1 values (one per sample), got 2");
}

}  // namespace
}  // namespace eps::routing
