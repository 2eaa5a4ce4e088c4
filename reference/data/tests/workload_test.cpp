// docs/numerics.md 2.3 workload generators, docs/routing.md 3.4 denoising masks, --tokens-per-rank.
#include "reference/data/workload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "reference/data/values.hpp"

namespace eps::data {
namespace {

constexpr std::uint64_t kSeed = 20240611;

WorkloadSpec spec_of(std::string_view text) {
  Result<WorkloadSpec> spec = parse_workload(text);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? spec.value() : WorkloadSpec{};
}

Routing generate(std::string_view text, RoutingShape shape, int rank, std::int64_t num_tokens, int step = 0,
                 std::int64_t token_begin = 0, int layer = 0) {
  RoutingRequest request;
  request.seed = kSeed;
  request.rank = rank;
  request.layer = layer;
  request.step = step;
  request.token_begin = token_begin;
  request.num_tokens = num_tokens;
  Result<Routing> routing = generate_routing(spec_of(text), shape, request);
  EXPECT_TRUE(routing.ok()) << routing.status().message();
  return routing.ok() ? routing.value() : Routing{};
}

std::vector<std::int64_t> expert_counts(const Routing& routing, int num_experts) {
  std::vector<std::int64_t> counts(num_experts, 0);
  for (std::int32_t id : routing.topk_idx) {
    if (id >= 0) ++counts[id];
  }
  return counts;
}

// Invariants every pattern keeps: ids in [-1, E), no duplicate within a token, weight 0 exactly for -1 slots
// and a multiple of 2^-10 in (0, 1] otherwise.
void expect_well_formed(const Routing& routing, int num_experts) {
  const int k = routing.top_k;
  ASSERT_EQ(routing.topk_idx.size(), static_cast<std::size_t>(routing.num_tokens * k));
  ASSERT_EQ(routing.topk_weights.size(), routing.topk_idx.size());
  ASSERT_EQ(routing.is_masked.size(), static_cast<std::size_t>(routing.num_tokens));
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
    std::set<std::int32_t> seen;
    for (int j = 0; j < k; ++j) {
      const std::int32_t id = routing.topk_idx[t * k + j];
      const float w = routing.topk_weights[t * k + j];
      ASSERT_GE(id, -1);
      ASSERT_LT(id, num_experts);
      if (id < 0) {
        ASSERT_EQ(w, 0.0f);
        continue;
      }
      ASSERT_TRUE(seen.insert(id).second) << "expert " << id << " twice in token " << t;
      ASSERT_GT(w, 0.0f);
      ASSERT_LE(w, 1.0f);
      ASSERT_EQ(std::ldexp(w, 10), std::floor(std::ldexp(w, 10)));
    }
  }
}

const char* const kRankFreePatterns[] = {"uniform",    "zipf:1.2",  "hot:3,0.5",
                                         "masked:0.3", "spatial:4", "drift:50"};

TEST(Workload, EveryPatternWellFormed) {
  const RoutingShape shape{4, 16, 6};
  for (const char* text : {"uniform", "zipf:1.2", "zipf:0", "zipf:3", "hot:3,0.5", "hot:0,1", "all-to-one",
                           "spread", "masked:0.3", "spatial:4", "drift:50"}) {
    SCOPED_TRACE(text);
    expect_well_formed(generate(text, shape, 1, 300, text == std::string_view("drift:50") ? 49 : 0), 16);
  }
  // K = E: every expert exactly once (uniform), and hot leaves one slot -1 when the token is not hot.
  const Routing full = generate("uniform", {1, 8, 8}, 0, 20);
  for (int t = 0; t < 20; ++t) {
    std::vector<std::int32_t> ids(full.topk_idx.begin() + t * 8, full.topk_idx.begin() + t * 8 + 8);
    std::sort(ids.begin(), ids.end());
    for (int e = 0; e < 8; ++e) ASSERT_EQ(ids[e], e);
  }
  expect_well_formed(generate("hot:2,0.5", {1, 8, 8}, 0, 50), 8);
}

// docs/numerics.md 2.1: rank 2's routing is the same in a 4-rank and an 8-rank world, forward or reversed,
// one token at a time or as a batch, or split into ranges.
TEST(Workload, RegenerationIndependentOfWorldSizeBatchAndOrder) {
  for (const char* text : kRankFreePatterns) {
    SCOPED_TRACE(text);
    const Routing in4 = generate(text, {4, 32, 4}, 2, 40, 7);
    const Routing in8 = generate(text, {8, 32, 4}, 2, 40, 7);
    EXPECT_EQ(in4.topk_idx, in8.topk_idx);
    EXPECT_EQ(in4.topk_weights, in8.topk_weights);
    EXPECT_EQ(in4.is_masked, in8.is_masked);
    for (std::int64_t t = 39; t >= 0; --t) {
      const Routing one = generate(text, {8, 32, 4}, 2, 1, 7, t);
      for (int j = 0; j < 4; ++j) {
        ASSERT_EQ(one.topk_idx[j], in4.topk_idx[t * 4 + j]) << "token " << t;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(one.topk_weights[j]),
                  std::bit_cast<std::uint32_t>(in4.topk_weights[t * 4 + j]));
      }
      ASSERT_EQ(one.is_masked[0], in4.is_masked[t]);
    }
    const Routing tail = generate(text, {4, 32, 4}, 2, 25, 7, 15);
    EXPECT_TRUE(std::equal(tail.topk_idx.begin(), tail.topk_idx.end(), in4.topk_idx.begin() + 15 * 4));
    // Another rank, step or layer gives other routing.
    EXPECT_NE(generate(text, {4, 32, 4}, 3, 40, 7).topk_idx, in4.topk_idx);
    EXPECT_NE(generate(text, {4, 32, 4}, 2, 40, 8).topk_idx, in4.topk_idx);
    EXPECT_NE(generate(text, {4, 32, 4}, 2, 40, 7, 0, 1).topk_idx, in4.topk_idx);
  }
}

TEST(Workload, ZeroTokensEverywhere) {
  for (const char* text :
       {"uniform", "zipf:1", "hot:1,0.5", "all-to-one", "spread", "masked:0.5", "spatial:8", "drift:4"}) {
    const Routing routing = generate(text, {4, 8, 4}, 3, 0);
    EXPECT_EQ(routing.num_tokens, 0);
    EXPECT_TRUE(routing.topk_idx.empty() && routing.topk_weights.empty() && routing.is_masked.empty())
        << text;
  }
}

// Uniform: per-expert counts against the chi-square statistic. E = 16, K = 4, T = 8000: expected count
// 2000 per expert; chi-square with 15 degrees of freedom has mean 15 and sd sqrt(30) = 5.5, so 45 is about
// 5.5 sd out (p ~ 1e-4): a biased sampler fails, a fair one passes.
TEST(WorkloadStatistics, UniformChiSquare) {
  const Routing routing = generate("uniform", {1, 16, 4}, 0, 8000);
  const std::vector<std::int64_t> counts = expert_counts(routing, 16);
  double chi2 = 0.0;
  for (std::int64_t c : counts) chi2 += (c - 2000.0) * (c - 2000.0) / 2000.0;
  EXPECT_LT(chi2, 45.0);
  // Slot 0 alone is uniform too (the first draw): expected 500 per expert, +-5 sd = +-112.
  std::vector<int> first(16, 0);
  for (int t = 0; t < 8000; ++t) ++first[routing.topk_idx[t * 4]];
  for (int c : first) EXPECT_NEAR(c, 500, 112);
}

// Zipf with K = 1: P(i-th most popular) proportional to (i+1)^-s, so count(top1) / count(top2) ~ 2^s.
// E = 16, s = 1.2: p1 = 1 / sum_{i<=16} i^-1.2 = 0.366, p2 = 0.159; with T = 40000 the ratio 2^1.2 = 2.297
// has sd ~ 2.297 * sqrt(1/14640 + 1/6370) = 0.034; tolerance 0.15 is 4.4 sd.
TEST(WorkloadStatistics, ZipfFrequencyRatio) {
  for (double s : {1.2, 2.0}) {
    const Routing routing = generate(fmt::format("zipf:{}", s), {1, 16, 1}, 0, 40000);
    std::vector<std::int64_t> counts = expert_counts(routing, 16);
    std::sort(counts.rbegin(), counts.rend());
    EXPECT_NEAR(static_cast<double>(counts[0]) / counts[1], std::pow(2.0, s), 0.15) << "s = " << s;
    // Third vs second: (3/2)^s.
    EXPECT_NEAR(static_cast<double>(counts[1]) / counts[2], std::pow(1.5, s), 0.15) << "s = " << s;
  }
  // zipf:0 is uniform: every expert within 5 sd of T / E = 2500 (sd ~ 48).
  const Routing flat = generate("zipf:0", {1, 16, 1}, 0, 40000);
  for (std::int64_t c : expert_counts(flat, 16)) EXPECT_NEAR(c, 2500, 245);
}

// hot:3,0.5: the fraction of tokens containing expert 3 is 0.5 (sd sqrt(0.25 / 8000) = 0.0056; tolerance
// 0.025 = 4.5 sd); the other experts share the rest uniformly.
TEST(WorkloadStatistics, HotFraction) {
  for (double p : {0.5, 0.9, 0.0, 1.0}) {
    const Routing routing = generate(fmt::format("hot:3,{}", p), {1, 16, 4}, 0, 8000);
    int hot = 0;
    std::vector<int> slot_of_hot(4, 0);
    for (int t = 0; t < 8000; ++t) {
      for (int j = 0; j < 4; ++j) {
        if (routing.topk_idx[t * 4 + j] == 3) {
          ++hot;
          ++slot_of_hot[j];
        }
      }
    }
    EXPECT_NEAR(hot / 8000.0, p, 0.025) << "p = " << p;
    // The hot expert's slot is uniform over the K slots.
    for (int c : slot_of_hot) EXPECT_NEAR(c, hot / 4.0, 5.0 * std::sqrt(hot / 4.0) + 1.0);
  }
}

TEST(WorkloadStatistics, AllToOneStaysOnRankZero) {
  const Routing routing = generate("all-to-one", {4, 16, 2}, 3, 500);
  for (std::int32_t id : routing.topk_idx) ASSERT_TRUE(id >= 0 && id < 4) << id;
  // K = 6 > E / R = 4: the four local experts of rank 0 once each, then -1.
  const Routing wide = generate("all-to-one", {4, 16, 6}, 1, 50);
  for (int t = 0; t < 50; ++t) {
    std::vector<std::int32_t> ids(wide.topk_idx.begin() + t * 6, wide.topk_idx.begin() + t * 6 + 4);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(wide.topk_idx[t * 6 + 4], -1);
    EXPECT_EQ(wide.topk_idx[t * 6 + 5], -1);
  }
}

TEST(WorkloadStatistics, SpreadReachesEveryRank) {
  for (RoutingShape shape : {RoutingShape{4, 16, 6}, RoutingShape{3, 12, 3}, RoutingShape{1, 8, 2}}) {
    const Routing routing = generate("spread", shape, 0, 300);
    const int local = shape.num_experts / shape.num_ranks;
    for (int t = 0; t < 300; ++t) {
      std::set<int> ranks;
      for (int j = 0; j < shape.top_k; ++j) ranks.insert(routing.topk_idx[t * shape.top_k + j] / local);
      ASSERT_EQ(static_cast<int>(ranks.size()), shape.num_ranks) << "token " << t;
    }
  }
}

// masked:0.3 with K = 4, T = 8000: the -1 fraction is 0.3 (sd sqrt(0.21 / 32000) = 0.0026, tolerance 0.013
// = 5 sd); fully masked tokens expected 0.3^4 * 8000 = 64.8 (sd ~ 8).
TEST(WorkloadStatistics, MaskedSlots) {
  const Routing routing = generate("masked:0.3", {1, 16, 4}, 0, 8000);
  const auto masked = std::count(routing.topk_idx.begin(), routing.topk_idx.end(), -1);
  EXPECT_NEAR(masked / 32000.0, 0.3, 0.013);
  int all_masked = 0;
  for (int t = 0; t < 8000; ++t) {
    all_masked += std::all_of(routing.topk_idx.begin() + t * 4, routing.topk_idx.begin() + t * 4 + 4,
                              [](std::int32_t id) { return id == -1; });
  }
  EXPECT_NEAR(all_masked, 64.8, 40.0);
  EXPECT_GE(all_masked, 1);
  // The unmasked slots are the uniform routing's slots.
  const Routing base = generate("uniform", {1, 16, 4}, 0, 8000);
  for (std::size_t i = 0; i < base.topk_idx.size(); ++i) {
    if (routing.topk_idx[i] != -1) {
      ASSERT_EQ(routing.topk_idx[i], base.topk_idx[i]);
    }
  }
  const Routing none = generate("masked:0", {1, 16, 4}, 0, 500);
  EXPECT_EQ(std::count(none.topk_idx.begin(), none.topk_idx.end(), -1), 0);
  const Routing all = generate("masked:1", {1, 16, 4}, 0, 500);
  EXPECT_EQ(std::count(all.topk_idx.begin(), all.topk_idx.end(), -1), 2000);
}

int overlap(const Routing& routing, std::int64_t a, std::int64_t b) {
  const int k = routing.top_k;
  int shared = 0;
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) shared += routing.topk_idx[a * k + i] == routing.topk_idx[b * k + j];
  }
  return shared;
}

// spatial:16, E = 64, K = 4: neighbours inside a window share far more experts than neighbours across a
// window boundary. Independent uniform tokens share K*K/E = 0.25 experts on average; preferred experts carry
// 90% of a token's first draw (4 x 540 against 60 x 4), 69% of the fourth, so a token holds ~3.3 of its
// window's 4 preferred experts and two tokens of one window share about 3.3^2/4 = 2.7.
TEST(WorkloadStatistics, SpatialWindowsShareExperts) {
  const Routing routing = generate("spatial:16", {1, 64, 4}, 0, 1024);
  double within = 0.0, across = 0.0;
  int n_within = 0, n_across = 0;
  for (std::int64_t t = 0; t + 1 < 1024; ++t) {
    if ((t + 1) % 16 == 0) {
      across += overlap(routing, t, t + 1);
      ++n_across;
    } else {
      within += overlap(routing, t, t + 1);
      ++n_within;
    }
  }
  within /= n_within;
  across /= n_across;
  EXPECT_GT(within, 2.0);
  EXPECT_LT(across, 0.75);
  EXPECT_GT(within, 3.0 * across);
}

std::vector<double> popularity(const Routing& routing, int num_experts) {
  const std::vector<std::int64_t> counts = expert_counts(routing, num_experts);
  const double total = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}));
  std::vector<double> p(num_experts);
  for (int e = 0; e < num_experts; ++e) p[e] = counts[e] / total;
  return p;
}

double l1(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::fabs(a[i] - b[i]);
  return d;
}

// drift:50, E = 32, K = 1: a Gaussian bump (sigma 4 positions) moving 32/50 = 0.64 positions per step. The
// L1 distance of two unit bumps shifted by d is about d * 2 * peak = 0.64 * 2 / (sqrt(2 pi) * 4) = 0.13 for
// adjacent steps; half-way (25 steps, 16 positions apart) the bumps barely overlap: L1 close to 2 (the 1%
// floor dilutes both a little). Sampling noise with T = 20000: sum of sd ~ 0.1.
TEST(WorkloadStatistics, DriftMovesSmoothly) {
  const RoutingShape shape{1, 32, 1};
  const auto p0 = popularity(generate("drift:50", shape, 0, 20000, 0), 32);
  const auto p1 = popularity(generate("drift:50", shape, 0, 20000, 1), 32);
  const auto p25 = popularity(generate("drift:50", shape, 0, 20000, 25), 32);
  const auto p49 = popularity(generate("drift:50", shape, 0, 20000, 49), 32);
  EXPECT_LT(l1(p0, p1), 0.35);
  EXPECT_LT(l1(p49, p0), 0.35);  // circular: the last step is next to the first
  EXPECT_GT(l1(p0, p25), 1.4);
  // The bump is concentrated: the 8 most popular experts take well over 8/32 of the traffic.
  std::vector<double> sorted = p0;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_GT(std::accumulate(sorted.begin(), sorted.begin() + 8, 0.0), 0.6);
}

// docs/routing.md 3.4 masks: per-sample ratio r_b = masked / S with rho_b ~ U(0, 1).
TEST(DenoiseMask, RatiosSpreadOverZeroToOne) {
  RoutingRequest request;
  request.seed = kSeed;
  request.rank = 1;
  request.num_tokens = 64 * 256;
  request.sequence_length = 256;
  Result<std::vector<std::uint8_t>> mask = generate_denoise_mask(WorkloadSpec{}, request);
  ASSERT_TRUE(mask.ok());
  Result<std::vector<float>> ratios = sample_mask_ratios(*mask, 256);
  ASSERT_TRUE(ratios.ok());
  ASSERT_EQ(ratios->size(), 64u);
  const float lo = *std::min_element(ratios->begin(), ratios->end());
  const float hi = *std::max_element(ratios->begin(), ratios->end());
  const double mean = std::accumulate(ratios->begin(), ratios->end(), 0.0) / 64.0;
  EXPECT_LT(lo, 0.2f);  // P(no sample below 0.2) = 0.8^64 ~ 6e-7
  EXPECT_GT(hi, 0.8f);
  EXPECT_NEAR(mean, 0.5, 0.15);  // sd of the mean of 64 U(0,1) = 0.036
  // The routing returns the same flags.
  const Routing routing = generate("uniform", {2, 8, 2}, 1, 1000);
  request.num_tokens = 1000;
  request.sequence_length = 512;
  EXPECT_EQ(routing.is_masked, generate_denoise_mask(WorkloadSpec{}, request).value());
}

// drift: the step's band of target ratios, [(steps-1-step)/steps, (steps-step)/steps); with S = 512 the
// empirical ratio is within 3 sd (0.066) of the target, so each sample's ratio lies in the band +- 0.07.
TEST(DenoiseMask, DriftFollowsTheTrajectory) {
  const WorkloadSpec spec = spec_of("drift:10");
  for (int step : {0, 4, 9}) {
    RoutingRequest request;
    request.seed = kSeed;
    request.step = step;
    request.num_tokens = 16 * 512;
    request.sequence_length = 512;
    const auto ratios = sample_mask_ratios(generate_denoise_mask(spec, request).value(), 512).value();
    const double band_lo = (10.0 - 1 - step) / 10.0, band_hi = (10.0 - step) / 10.0;
    for (float r : ratios) {
      EXPECT_GE(r, band_lo - 0.07) << "step " << step;
      EXPECT_LE(r, band_hi + 0.07) << "step " << step;
    }
  }
}

TEST(DenoiseMask, SampleRatiosByHand) {
  const std::vector<std::uint8_t> flags{1, 0, 1, 1, 0, 0, 1};
  EXPECT_EQ(sample_mask_ratios(flags, 4).value(), (std::vector<float>{0.75f, 1.0f / 3.0f}));
  EXPECT_EQ(sample_mask_ratios(flags, 2).value(), (std::vector<float>{0.5f, 1.0f, 0.0f, 1.0f}));
  EXPECT_TRUE(sample_mask_ratios({}, 4).value().empty());
  EXPECT_EQ(sample_mask_ratios(flags, 0).status().message(),
            "sequence_length: must be in [1, 2147483647], got 0");
}

TEST(WorkloadParse, CanonicalNamesRoundTrip) {
  for (const char* text : {"uniform", "zipf:1.2", "zipf:0", "hot:3,0.5", "all-to-one", "spread", "masked:0.3",
                           "spatial:16", "drift:50"}) {
    EXPECT_EQ(workload_name(spec_of(text)), text);
  }
  const WorkloadSpec hot = spec_of("hot:3,0.5");
  EXPECT_EQ(hot.pattern, WorkloadPattern::kHot);
  EXPECT_EQ(hot.hot_expert, 3);
  EXPECT_EQ(hot.hot_fraction, 0.5);
}

std::string parse_error(std::string_view text) {
  Result<WorkloadSpec> spec = parse_workload(text);
  EXPECT_FALSE(spec.ok()) << text;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  return spec.status().message();
}

TEST(WorkloadParse, BadInputsNameTheParameter) {
  EXPECT_EQ(parse_error("zipf:5"), "zipf:s: must be in [0, 3], got 5");
  EXPECT_EQ(parse_error("zipf:-0.5"), "zipf:s: must be in [0, 3], got -0.5");
  EXPECT_EQ(parse_error("zipf:"), "zipf:s: expected a number in [0, 3], got ''");
  EXPECT_EQ(parse_error("zipf:1.2x"), "zipf:s: expected a number in [0, 3], got '1.2x'");
  EXPECT_EQ(parse_error("hot:3"), "hot: expected hot:e,p, got 'hot:3'");
  EXPECT_EQ(parse_error("hot:3,1.5"), "hot:p: must be in [0, 1], got 1.5");
  EXPECT_EQ(parse_error("hot:-1,0.5"), "hot:e: expected an expert id in [0, E), got '-1'");
  EXPECT_EQ(parse_error("masked:2"), "masked:p: must be in [0, 1], got 2");
  EXPECT_EQ(parse_error("spatial:0"), "spatial:w: must be in [1, 2147483647], got 0");
  EXPECT_EQ(parse_error("drift:0"), "drift:steps: must be in [1, 16384], got 0");
  EXPECT_EQ(parse_error("drift:1.5"), "drift:steps: expected an integer in [1, 16384], got '1.5'");
  EXPECT_NE(parse_error("bogus").find("workload: unknown pattern 'bogus' (allowed: uniform, zipf:s"),
            std::string::npos);
  EXPECT_NE(parse_error("uniform:3").find("unknown pattern 'uniform:3'"), std::string::npos);
  EXPECT_EQ(parse_error("trace:routing.txt"), "trace:FILE: 'routing.txt' must end in .json or .csv");
  EXPECT_NE(parse_error("trace:/nonexistent/t.json").find("trace:FILE: cannot open '/nonexistent/t.json'"),
            std::string::npos);
}

std::string generate_error(std::string_view text, RoutingShape shape, RoutingRequest request = {}) {
  Result<Routing> routing = generate_routing(spec_of(text), shape, request);
  EXPECT_FALSE(routing.ok()) << text;
  return routing.ok() ? "" : routing.status().message();
}

TEST(WorkloadValidate, ShapeDependentErrors) {
  EXPECT_EQ(generate_error("hot:16,0.5", {1, 16, 2}), "hot:e: must be in [0, 15], got 16");
  EXPECT_EQ(generate_error("spread", {4, 16, 3}),
            "top_k: spread needs top_k >= num_ranks (4) so every rank is reached, got 3");
  EXPECT_EQ(generate_error("all-to-one", {3, 16, 2}),
            "num_experts: all-to-one needs a multiple of num_ranks 3, got 16");
  EXPECT_EQ(generate_error("uniform", {1, 16, 17}), "top_k: must be in [1, 16], got 17");
  EXPECT_EQ(generate_error("uniform", {1, 16, 0}), "top_k: must be in [1, 16], got 0");
  RoutingRequest request;
  request.rank = 4;
  EXPECT_EQ(generate_error("uniform", {4, 16, 2}, request), "rank: must be in [0, 3], got 4");
  request.rank = 0;
  request.step = 50;
  EXPECT_EQ(generate_error("drift:50", {4, 16, 2}, request), "step: must be in [0, 49], got 50");
  request.step = 0;
  request.num_tokens = -1;
  EXPECT_EQ(generate_error("uniform", {4, 16, 2}, request), "num_tokens: must be in [0, 2147483647], got -1");
  request.num_tokens = 1;
  request.layer = 1024;
  EXPECT_EQ(generate_error("uniform", {4, 16, 2}, request), "layer: must be in [0, 1023], got 1024");
}

TEST(TokensPerRank, FixedListAndRange) {
  EXPECT_EQ(resolve_tokens_per_rank(parse_tokens_per_rank("128").value(), 3, kSeed).value(),
            (std::vector<std::int64_t>{128, 128, 128}));
  EXPECT_EQ(resolve_tokens_per_rank(parse_tokens_per_rank("0,5,128").value(), 3, kSeed).value(),
            (std::vector<std::int64_t>{0, 5, 128}));
  EXPECT_EQ(resolve_tokens_per_rank(parse_tokens_per_rank("0,5,128").value(), 4, kSeed).status().message(),
            "tokens-per-rank: a list needs 1 or num_ranks = 4 entries, got 3");
  const TokensPerRankSpec range = parse_tokens_per_rank("0:256").value();
  const auto in8 = resolve_tokens_per_rank(range, 8, kSeed).value();
  const auto in64 = resolve_tokens_per_rank(range, 64, kSeed).value();
  EXPECT_TRUE(std::equal(in8.begin(), in8.end(), in64.begin()));  // rank r's count does not depend on R
  for (std::int64_t t : in64) EXPECT_TRUE(t >= 0 && t <= 256);
  EXPECT_GT(std::set<std::int64_t>(in64.begin(), in64.end()).size(), 40u);  // 64 draws of 257 values
  EXPECT_NE(resolve_tokens_per_rank(range, 8, kSeed + 1).value(), in8);
  // Both ends reachable: "0:1" over 64 ranks has zeros and ones (P(all equal) = 2^-63).
  const auto bits = resolve_tokens_per_rank(parse_tokens_per_rank("0:1").value(), 64, kSeed).value();
  EXPECT_GT(std::count(bits.begin(), bits.end(), 0), 10);
  EXPECT_GT(std::count(bits.begin(), bits.end(), 1), 10);
  EXPECT_EQ(resolve_tokens_per_rank(parse_tokens_per_rank("7:7").value(), 2, kSeed).value(),
            (std::vector<std::int64_t>{7, 7}));
}

TEST(TokensPerRank, BadInputs) {
  EXPECT_EQ(parse_tokens_per_rank("-1").status().message(),
            "tokens-per-rank: entry 0: must be in [0, 2147483647], got -1");
  EXPECT_EQ(parse_tokens_per_rank("1,,2").status().message(),
            "tokens-per-rank: entry 1: expected an integer in [0, 2147483647], got ''");
  EXPECT_EQ(parse_tokens_per_rank("9:3").status().message(),
            "tokens-per-rank: range a:b needs a <= b, got 9:3");
  EXPECT_EQ(parse_tokens_per_rank("abc").status().message(),
            "tokens-per-rank: entry 0: expected an integer in [0, 2147483647], got 'abc'");
  EXPECT_EQ(parse_tokens_per_rank("3000000000").status().message(),
            "tokens-per-rank: entry 0: must be in [0, 2147483647], got 3000000000");
  EXPECT_FALSE(parse_tokens_per_rank("").ok());
  EXPECT_FALSE(parse_tokens_per_rank("1:").ok());
}

}  // namespace
}  // namespace eps::data
