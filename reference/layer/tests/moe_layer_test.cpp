// MoE layer reference (docs/layer.md 4.3): EC invariants at layer level, dropped tokens, TC and EC against a
// brute-force recomputation written here, combine trees (ht-rank vs ll-weighted), gate GEMM, errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "reference/data/fill.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/layer/combine.hpp"
#include "reference/layer/moe_layer.hpp"
#include "reference/numerics/quant.hpp"

namespace eps {
namespace {

routing::ExpertChoiceConfig ec_router(std::int64_t k) {
  routing::ExpertChoiceConfig ec;
  ec.k_schedule.k = k;
  return ec;
}

routing::TokenChoiceConfig tc_router(std::int64_t k) {
  routing::TokenChoiceConfig tc;
  tc.k = k;
  tc.renorm = true;
  return tc;
}

MoeLayerConfig small_config(routing::RouterConfig router) {
  MoeLayerConfig c;
  c.seed = 3;
  c.layer = 1;
  c.hidden = 32;
  c.ffn = 16;
  c.num_experts = 8;
  c.num_shared = 2;
  c.shared_ffn = 24;
  c.seq_len = 16;
  c.num_samples = 3;
  c.router = std::move(router);
  return c;
}

MoeLayerResult run(const MoeLayerConfig& c) {
  auto r = run_moe_layer(c);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

// One expert applied to one token row on its own (a batch of 1), straight from the expert library.
std::vector<bf16> expert_row(const MoeLayerConfig& c, ExpertRole role, int index, std::span<const bf16> row) {
  const int ffn = role == ExpertRole::kShared ? c.shared_ffn : c.ffn;
  auto w = generate_expert_weights(c.seed, c.layer, role, static_cast<std::uint32_t>(index), {c.hidden, ffn});
  EXPECT_TRUE(w.ok());
  auto e = Expert::create(std::move(w).value(), c.kernel);
  EXPECT_TRUE(e.ok());
  std::vector<bf16> y(row.size());
  EXPECT_TRUE(e->forward(row, ExpertOutputs{y}).ok());
  return y;
}

std::span<const bf16> token_row(const MoeLayerInputs& in, const MoeLayerConfig& c, std::int64_t t) {
  return std::span<const bf16>(in.x).subspan(t * c.hidden, c.hidden);
}

// out_i recomputed token by token from the slots (expert, weight): docs/layer.md 4.3 ll-weighted, or ht-rank
// with every expert on its own rank (R = E), then the shared experts in ascending order.
std::vector<bf16> recompute_token(const MoeLayerConfig& c, const MoeLayerInputs& in, std::int64_t t,
                                  std::span<const std::int32_t> experts, std::span<const float> weights,
                                  bool rank_per_expert) {
  std::vector<float> acc(c.hidden, 0.0f);
  for (std::size_t k = 0; k < experts.size(); ++k) {
    if (experts[k] < 0) continue;
    const std::vector<bf16> y = expert_row(c, ExpertRole::kRouted, experts[k], token_row(in, c, t));
    for (int h = 0; h < c.hidden; ++h) {
      const float term = weights[k] * y[h].to_float();
      acc[h] = acc[h] + (rank_per_expert ? round_to_bf16(term) : term);
    }
  }
  for (float& a : acc) a = round_to_bf16(a);  // routed_i
  for (int s = 0; s < c.num_shared; ++s) {
    const std::vector<bf16> y = expert_row(c, ExpertRole::kShared, s, token_row(in, c, t));
    for (int h = 0; h < c.hidden; ++h) acc[h] = acc[h] + y[h].to_float();
  }
  std::vector<bf16> out(c.hidden);
  for (int h = 0; h < c.hidden; ++h) out[h] = bf16::from_float(acc[h]);
  return out;
}

void expect_row_bits(std::span<const bf16> got, const std::vector<bf16>& expect, std::int64_t t) {
  for (std::size_t h = 0; h < expect.size(); ++h)
    ASSERT_EQ(got[h].bits, expect[h].bits) << "token " << t << " h " << h;
}

// docs/routing.md 3.3 invariants seen through the layer: every expert gets exactly c_b tokens of each sample,
// and the layer computes Σ_i |J_i| = E · Σ_b c_b expert rows.
TEST(MoeLayer, ExpertChoiceInvariants) {
  routing::ExpertChoiceConfig scheduled = ec_router(2);
  scheduled.k_schedule.schedule.kind = routing::ScheduleKind::kLinearReverse;
  scheduled.k_schedule.k_min = 1;
  scheduled.k_schedule.k_max = 6;
  for (const auto& router : {ec_router(2), scheduled}) {
    MoeLayerConfig c = small_config(router);
    if (router.k_schedule.schedule.kind != routing::ScheduleKind::kStatic) {
      c.mask_ratio = {0.1f, 0.5f, 0.9f};
    }
    const MoeLayerResult r = run(c);
    const routing::Routing& routing = r.routing;
    ASSERT_EQ(routing.k_per_sample.size(), 3u);
    std::int64_t sum_c = 0;
    for (std::int64_t b = 0; b < 3; ++b) {
      const std::int64_t c_b = std::max<std::int64_t>(c.seq_len * routing.k_per_sample[b] / c.num_experts, 1);
      sum_c += c_b;
      std::vector<std::int64_t> per_expert(c.num_experts, 0);
      for (std::int64_t t = b * c.seq_len; t < (b + 1) * c.seq_len; ++t) {
        const auto experts = routing.experts(t);
        EXPECT_TRUE(std::is_sorted(experts.begin(), experts.end()));  // EC slot order: ascending id
        for (std::int32_t e : experts) ++per_expert[e];
      }
      for (int e = 0; e < c.num_experts; ++e)
        EXPECT_EQ(per_expert[e], c_b) << "sample " << b << " expert " << e;
    }
    // Static k = 2: c_b = floor(16 * 2 / 8) = 4 for every sample.
    if (c.mask_ratio.empty()) {
      EXPECT_EQ(sum_c, 12);
    }
    EXPECT_EQ(r.expert_rows, c.num_experts * sum_c);
    EXPECT_EQ(static_cast<std::int64_t>(routing.slot_expert.size()), c.num_experts * sum_c);
    EXPECT_EQ(r.shared_rows, 2 * c.num_tokens());
  }
}

// Tokens no expert picked (|J_i| = 0) have routed_i = +0 and out_i = bf16(0 + shared_0 + shared_1), with
// the shared outputs computed here by the expert kernel on the single token row.
TEST(MoeLayer, DroppedTokensGetSharedOutputOnly) {
  for (auto kernel : {ExpertKernelKind::kScalar, ExpertKernelKind::kVectorized}) {
    MoeLayerConfig c = small_config(ec_router(1));  // c_b = floor(16 / 8) = 2: 16 picks over 16 tokens
    c.kernel = kernel;
    auto in = generate_moe_layer_inputs(c);
    ASSERT_TRUE(in.ok());
    auto r = run_moe_layer(c, *in);
    ASSERT_TRUE(r.ok()) << r.status().message();
    int dropped = 0;
    for (std::int64_t t = 0; t < c.num_tokens(); ++t) {
      if (r->routing.num_slots(t) != 0) continue;
      ++dropped;
      const auto routed = std::span<const bf16>(r->routed).subspan(t * c.hidden, c.hidden);
      for (const bf16& v : routed) ASSERT_EQ(v.bits, 0);
      const std::vector<bf16> s0 = expert_row(c, ExpertRole::kShared, 0, token_row(*in, c, t));
      const std::vector<bf16> s1 = expert_row(c, ExpertRole::kShared, 1, token_row(*in, c, t));
      std::vector<bf16> expect(c.hidden);
      for (int h = 0; h < c.hidden; ++h)
        expect[h] = bf16::from_float((0.0f + s0[h].to_float()) + s1[h].to_float());
      expect_row_bits(std::span<const bf16>(r->out).subspan(t * c.hidden, c.hidden), expect, t);
    }
    EXPECT_EQ(dropped, r->routing.dropped_tokens);
    EXPECT_GT(dropped, 0) << "the data should leave some token unpicked";
  }
}

// Brute-force selection: EC = per (sample, expert) the c_b tokens with the largest logits, lower position
// first on ties; TC softmax = per token the K largest logits, lower index first (softmax is monotone).
std::vector<std::vector<std::int32_t>> brute_force_selection(const MoeLayerConfig& c,
                                                             const std::vector<float>& l, bool expert_choice,
                                                             int k) {
  const std::int64_t tokens = c.num_tokens();
  const int experts = c.num_experts;
  std::vector<std::vector<std::int32_t>> sel(tokens);
  if (!expert_choice) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::vector<int> ids(experts);
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(),
                       [&](int a, int b) { return l[t * experts + a] > l[t * experts + b]; });
      sel[t].assign(ids.begin(), ids.begin() + k);
    }
    return sel;
  }
  const std::int64_t cap = std::max<std::int64_t>(c.seq_len * k / experts, 1);
  for (std::int64_t b = 0; b < c.num_samples; ++b) {
    for (int e = 0; e < experts; ++e) {
      std::vector<std::int64_t> pos(c.seq_len);
      std::iota(pos.begin(), pos.end(), b * c.seq_len);
      std::stable_sort(pos.begin(), pos.end(), [&](std::int64_t x, std::int64_t y) {
        return l[x * experts + e] > l[y * experts + e];
      });
      for (std::int64_t i = 0; i < cap; ++i) sel[pos[i]].push_back(e);  // e ascending: EC slot order
    }
  }
  return sel;
}

// Gates in double: softmax over the selected logits (EC: over J_i; TC with renorm: p_sel / Σ p_sel,
// which is the same expression).
std::vector<double> brute_force_gates(const std::vector<float>& l, int experts, std::int64_t t,
                                      const std::vector<std::int32_t>& sel) {
  double m = -INFINITY, sum = 0;
  for (std::int32_t e : sel) m = std::max(m, static_cast<double>(l[t * experts + e]));
  std::vector<double> g;
  for (std::int32_t e : sel) {
    g.push_back(std::exp(l[t * experts + e] - m));
    sum += g.back();
  }
  for (double& v : g) v /= sum;
  return g;
}

TEST(MoeLayer, TokenChoiceAndExpertChoiceMatchBruteForce) {
  for (bool expert_choice : {true, false}) {
    for (auto kernel : {ExpertKernelKind::kScalar, ExpertKernelKind::kVectorized}) {
      MoeLayerConfig c = small_config(expert_choice ? routing::RouterConfig(ec_router(2))
                                                    : routing::RouterConfig(tc_router(2)));
      c.hidden = 8;
      c.ffn = 4;
      c.num_experts = 4;
      c.num_shared = 2;  // two shared experts pin the order ((routed + s0) + s1)
      c.shared_ffn = 8;
      c.seq_len = 6;
      c.num_samples = 2;
      c.kernel = kernel;
      auto in = generate_moe_layer_inputs(c);
      ASSERT_TRUE(in.ok());
      auto r = run_moe_layer(c, *in);
      ASSERT_TRUE(r.ok()) << r.status().message();
      const auto sel = brute_force_selection(c, in->logits, expert_choice, 2);
      for (std::int64_t t = 0; t < c.num_tokens(); ++t) {
        const auto experts = r->routing.experts(t);
        const auto gates = r->routing.gates(t);
        ASSERT_EQ(std::vector<std::int32_t>(experts.begin(), experts.end()), sel[t]) << "token " << t;
        const std::vector<double> g = brute_force_gates(in->logits, c.num_experts, t, sel[t]);
        for (std::size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(gates[k], g[k], 1e-6 * g[k] + 1e-12);
        const std::vector<bf16> expect = recompute_token(c, *in, t, experts, gates, false);
        expect_row_bits(std::span<const bf16>(r->out).subspan(t * c.hidden, c.hidden), expect, t);
      }
    }
  }
}

// docs/layer.md 4.3: with R = 1 (or all experts on one rank) ht-rank is bf16(0 + p_0) = p_0 = ll-weighted.
TEST(MoeLayer, HtRankEqualsLlWeightedWhenSlotsShareOneRank) {
  MoeLayerConfig c = small_config(ec_router(3));
  const MoeLayerResult ll = run(c);
  c.combine = CombineTree::kHtRank;
  c.num_ranks = 1;
  const MoeLayerResult ht1 = run(c);
  c.num_ranks = 4;
  c.expert_rank.assign(c.num_experts, 2);  // every expert on rank 2 of 4
  const MoeLayerResult ht_one_rank = run(c);
  for (std::size_t i = 0; i < ll.out.size(); ++i) {
    ASSERT_EQ(ht1.routed[i].bits, ll.routed[i].bits);
    ASSERT_EQ(ht1.out[i].bits, ll.out[i].bits);
    ASSERT_EQ(ht_one_rank.out[i].bits, ll.out[i].bits);
  }
}

// ht-rank with one expert per rank (R = E, default placement e / (E/R) = e): each slot's term is its
// own bf16 partial, recomputed here independently.
TEST(MoeLayer, HtRankWithOneExpertPerRankMatchesRecomputation) {
  MoeLayerConfig c = small_config(ec_router(3));
  c.combine = CombineTree::kHtRank;
  c.num_ranks = c.num_experts;
  auto in = generate_moe_layer_inputs(c);
  ASSERT_TRUE(in.ok());
  auto r = run_moe_layer(c, *in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->expert_rank, std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}));
  for (std::int64_t t : {0, 7, 20, 47}) {
    const auto expect = recompute_token(c, *in, t, r->routing.experts(t), r->routing.gates(t), true);
    expect_row_bits(std::span<const bf16>(r->out).subspan(t * c.hidden, c.hidden), expect, t);
  }
}

// Hand case, H = 1, weights 1, slots on experts 0, 1, 2 with y = 1, 2^-8, 2^-8; experts 0 and 2 on rank 0,
// expert 1 on rank 1:
//   ll-weighted: (1 + 2^-8) + 2^-8 = 1 + 2^-7 (exact in fp32) -> bf16 1.0078125 (7 fraction bits hold it)
//   ht-rank:     p_0 = bf16(1 + 2^-8): halfway between 1 and 1 + 2^-7, ties to even -> 1.0;
//                p_1 = bf16(2^-8) = 2^-8; routed = bf16(1 + 2^-8) -> 1.0 again
TEST(Combine, HtRankAndLlWeightedDifferByRoundingHandCase) {
  const std::vector<std::int32_t> experts = {0, 1, 2};
  const std::vector<float> weights = {1.0f, 1.0f, 1.0f};
  const std::vector<bf16> y = {bf16::from_float(1.0f), bf16::from_float(0x1p-8f), bf16::from_float(0x1p-8f)};
  const std::vector<int> rank = {0, 1, 0};
  std::vector<bf16> out(1);
  combine_token(CombineTree::kLlWeighted, experts, weights, y, 1, rank, out);
  EXPECT_EQ(out[0].to_float(), 1.0078125f);
  combine_token(CombineTree::kHtRank, experts, weights, y, 1, rank, out);
  EXPECT_EQ(out[0].to_float(), 1.0f);
  // A dropped slot (-1) is skipped and a token without valid slots is +0 in both trees.
  const std::vector<std::int32_t> none = {-1};
  for (auto tree : {CombineTree::kLlWeighted, CombineTree::kHtRank}) {
    combine_token(tree, none, std::vector<float>{0.0f}, std::vector<bf16>{bf16::from_float(5.0f)}, 1, rank,
                  out);
    EXPECT_EQ(out[0].bits, 0);
  }
}

// Gate GEMM: x = [1, 2], Wg rows [0.5, -1] and [0.25, 0.25]: logits 1·0.5 + 2·(-1) = -1.5 and
// 1·0.25 + 2·0.25 = 0.75. At layer level with docs/numerics.md 2.2 data every product and partial sum is
// exact in fp32 (H = 32), so the layer's logits equal a float64 recomputation from the same gate weights.
TEST(MoeLayer, GateLogits) {
  const std::vector<bf16> x = {bf16::from_float(1.0f), bf16::from_float(2.0f)};
  const std::vector<bf16> g = {bf16::from_float(0.5f), bf16::from_float(-1.0f), bf16::from_float(0.25f),
                               bf16::from_float(0.25f)};
  auto l = gate_logits(x, g, 2);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, std::vector<float>({-1.5f, 0.75f}));

  MoeLayerConfig c = small_config(ec_router(2));
  c.logits = LogitsSource::kGate;
  auto in = generate_moe_layer_inputs(c);
  ASSERT_TRUE(in.ok());
  std::vector<bf16> wg(static_cast<std::size_t>(c.num_experts) * c.hidden);
  ASSERT_TRUE(
      data::fill_expert_weight(c.seed, c.layer, data::WeightMatrix::kGate, 0, c.num_experts, c.hidden, wg)
          .ok());
  for (std::int64_t t = 0; t < c.num_tokens(); ++t) {
    for (int e = 0; e < c.num_experts; ++e) {
      double sum = 0;
      for (int h = 0; h < c.hidden; ++h) {
        sum += static_cast<double>(in->x[t * c.hidden + h].to_float()) * wg[e * c.hidden + h].to_float();
      }
      ASSERT_EQ(in->logits[t * c.num_experts + e], static_cast<float>(sum));
    }
  }
  EXPECT_TRUE(run_moe_layer(c, *in).ok());
}

TEST(MoeLayer, ErrorsNameTheField) {
  MoeLayerConfig c = small_config(ec_router(2));
  c.hidden = 0;
  EXPECT_EQ(run_moe_layer(c).status().message(), "hidden: must be in [1, 65536], got 0");
  c = small_config(ec_router(9));
  EXPECT_EQ(validate_moe_layer_config(c).message(), "router.k: must be in [1, 8], got 9");
  c = small_config(ec_router(2));
  c.combine = CombineTree::kHtRank;
  c.num_ranks = 3;
  EXPECT_EQ(validate_moe_layer_config(c).message(),
            "num_ranks: must divide num_experts = 8 for the default placement, got 3");
  c.num_ranks = 2;
  c.expert_rank = {0, 1, 5, 0, 1, 0, 1, 0};
  EXPECT_EQ(validate_moe_layer_config(c).message(), "expert_rank[2]: must be in [0, 1], got 5");
  c = small_config(ec_router(2));
  c.mask_ratio = {0.5f};
  EXPECT_EQ(validate_moe_layer_config(c).message(), "mask_ratio: expected num_samples = 3 values, got 1");
  c = small_config(ec_router(2));
  c.shared_ffn = 0;
  EXPECT_EQ(validate_moe_layer_config(c).message(), "shared_ffn: must be in [1, 65536], got 0");
  c = small_config(ec_router(2));
  c.combine = CombineTree::kHtTwoLevel;
  EXPECT_EQ(validate_moe_layer_config(c).message(),
            "combine: the layer reference evaluates ll-weighted and ht-rank, got ht-two-level");
  EXPECT_EQ(parse_combine_tree("combine", "tree").status().message(),
            "combine: must be one of {ll-weighted, ht-rank}, got \"tree\"");
  MoeLayerInputs bad;
  bad.x.resize(3);
  EXPECT_EQ(run_moe_layer(small_config(ec_router(2)), bad).status().message(),
            "x: expected T x H = 48 x 32 values, got 3");
}

// docs/layer.md 4.4: with routing groups every group (a rank's tokens) is routed on its own, so token-choice
// capacity holds per group; the joined routing is the concatenation of the groups' routings.
TEST(MoeLayer, RoutingGroupsRouteEachGroupOnItsOwn) {
  routing::TokenChoiceConfig tc = tc_router(2);
  tc.capacity = routing::CapacityFormula::kMegatron;
  tc.capacity_factor = 0.5;
  MoeLayerConfig c = small_config(tc);  // T = 48, S = 16
  c.routing_groups = {16, 0, 32};
  const MoeLayerInputs in = generate_moe_layer_inputs(c).value();
  const MoeLayerResult r = run_moe_layer(c, in).value();
  std::vector<std::int32_t> experts;
  std::vector<float> gates;
  std::int64_t capacity = 0, dropped = 0;
  std::int64_t first = 0;
  for (std::int64_t n : {16, 32}) {
    const routing::RoutingInput part{
        std::span<const float>(in.logits).subspan(first * 8, n * 8), n, 8, 16, {}};
    const routing::Routing routed = routing::route(c.router, part).value();
    experts.insert(experts.end(), routed.slot_expert.begin(), routed.slot_expert.end());
    gates.insert(gates.end(), routed.slot_gate.begin(), routed.slot_gate.end());
    capacity += *routed.capacity;  // megatron: ceil(16·2/8·0.5) = 2, ceil(32·2/8·0.5) = 4
    dropped += routed.dropped_assignments;
    first += n;
  }
  EXPECT_EQ(r.routing.slot_expert, experts);
  EXPECT_EQ(r.routing.slot_gate, gates);
  ASSERT_TRUE(r.routing.capacity.has_value());
  EXPECT_EQ(*r.routing.capacity, 6);
  EXPECT_EQ(capacity, 6);
  EXPECT_EQ(r.routing.dropped_assignments, dropped);
  EXPECT_GT(dropped, 0);  // capacity 0.5 must drop something, else this test shows nothing
  const double slots = 8.0 * 6.0;
  EXPECT_DOUBLE_EQ(*r.routing.padding_waste, (slots - static_cast<double>(96 - dropped)) / slots);
  EXPECT_DOUBLE_EQ(r.routing.drop_ratio, static_cast<double>(dropped) / 96.0);
  // One group of all tokens has another capacity (ceil(48·2/8·0.5) = 6) and so drops differently.
  c.routing_groups.clear();
  EXPECT_EQ(*run_moe_layer(c, in).value().routing.capacity, 6);
  EXPECT_NE(run_moe_layer(c, in).value().routing.slot_expert, experts);
}

TEST(MoeLayer, RoutingGroupsDoNotChangeSequenceScopeExpertChoice) {
  MoeLayerConfig c = small_config(ec_router(2));
  const MoeLayerResult whole = run(c);
  c.routing_groups = {32, 0, 16};
  const MoeLayerResult grouped = run(c);
  EXPECT_EQ(grouped.routing.slot_expert, whole.routing.slot_expert);
  EXPECT_EQ(grouped.routing.capacity_per_sample, whole.routing.capacity_per_sample);
  ASSERT_EQ(grouped.out.size(), whole.out.size());
  for (std::size_t i = 0; i < whole.out.size(); ++i) ASSERT_EQ(grouped.out[i].bits, whole.out[i].bits) << i;
}

// With fp8 dispatch the routed experts see the fp8 round trip of x (reference/numerics/quant.hpp,
// power-of-two scales) and the shared experts x itself: the routed output equals that of a bf16 layer fed the
// round trip.
TEST(MoeLayer, Fp8DispatchFeedsTheRoundTripToRoutedExperts) {
  MoeLayerConfig c = small_config(ec_router(2));
  c.hidden = 128;
  c.num_shared = 1;
  const MoeLayerInputs in = generate_moe_layer_inputs(c).value();
  const Fp8Batch batch = quantize_fp8_per_token(in.x, 48, 128, Fp8ScaleMode::kRoundScale).value();
  const std::vector<float> values = dequantize_fp8_per_token(batch).value();
  MoeLayerInputs round_trip = in;
  bool changed = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    round_trip.x[i] = bf16::from_float(values[i]);
    ASSERT_EQ(round_trip.x[i].to_float(), values[i]) << "not exact in bf16 at " << i;
    changed = changed || round_trip.x[i].bits != in.x[i].bits;
  }
  ASSERT_TRUE(changed);  // else fp8 and bf16 would agree trivially
  c.dispatch_dtype = dispatch::PayloadType::kFp8;
  const MoeLayerResult fp8 = run_moe_layer(c, in).value();
  c.dispatch_dtype = dispatch::PayloadType::kBf16;
  const MoeLayerResult expected = run_moe_layer(c, round_trip).value();
  const MoeLayerResult plain = run_moe_layer(c, in).value();
  std::int64_t differ_from_plain = 0;
  for (std::size_t i = 0; i < fp8.routed.size(); ++i) {
    ASSERT_EQ(fp8.routed[i].bits, expected.routed[i].bits) << i;
    differ_from_plain += fp8.routed[i].bits != plain.routed[i].bits;
  }
  EXPECT_GT(differ_from_plain, 0);
}

TEST(MoeLayer, RoutingGroupAndFp8Errors) {
  MoeLayerConfig c = small_config(ec_router(2));
  c.routing_groups = {16, 8, 24};
  EXPECT_EQ(validate_moe_layer_config(c).message(),
            "routing_groups[1]: 8 tokens is not a multiple of seq_len 16");
  c.routing_groups = {16, 16};
  EXPECT_EQ(validate_moe_layer_config(c).message(),
            "routing_groups: the groups hold 32 tokens, expected T = 48");
  c.routing_groups = {-16, 64};
  EXPECT_EQ(validate_moe_layer_config(c).message(), "routing_groups[0]: must be in [0, 48], got -16");
  c.routing_groups.clear();
  c.dispatch_dtype = dispatch::PayloadType::kFp8;
  EXPECT_EQ(validate_moe_layer_config(c).message(),
            "dispatch_dtype: fp8 needs hidden to be a multiple of 128, got 32");
  EXPECT_EQ(routing::join_routings({}).status().message(), "parts: need at least one routing to join");
}

}  // namespace
}  // namespace eps
