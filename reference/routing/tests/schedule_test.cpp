// docs/routing.md 3.4: timestep-dependent capacity schedules, including the cosine evaluation order and k_b
// pinned for every mask ratio m/S against an independent fp32 re-implementation of the formula.
#include "reference/routing/schedule.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "reference/numerics/transcendental.hpp"

namespace eps::routing {
namespace {

KSchedule make(ScheduleKind kind, std::int64_t k_min = 8, std::int64_t k_max = 32, float sigma = 0.0f) {
  KSchedule k;
  k.schedule.kind = kind;
  k.schedule.sigma = sigma;
  k.k = 20;
  k.k_min = k_min;
  k.k_max = k_max;
  return k;
}

// docs/routing.md 3.4 golden fact: with r ~ U(0, 1), k_min 8, k_max 32, E[k] = 20.00. Integrated over 10^6
// midpoints r = (i + 0.5) / 10^6.
double expected_k(const KSchedule& k_schedule) {
  constexpr int kSteps = 1000000;
  double sum = 0.0;
  for (int i = 0; i < kSteps; ++i) {
    const auto r = static_cast<float>((i + 0.5) / kSteps);
    sum += static_cast<double>(scheduled_k(k_schedule, r));
  }
  return sum / kSteps;
}

TEST(Schedule, GoldenExpectedKIsTwentyForLinearAndCosineFamilies) {
  for (ScheduleKind kind : {ScheduleKind::kLinear, ScheduleKind::kLinearReverse, ScheduleKind::kCosine,
                            ScheduleKind::kCosineReverse}) {
    EXPECT_NEAR(expected_k(make(kind)), 20.0, 0.01) << schedule_name(kind);
  }
}

TEST(Schedule, EndpointsAndMidpoint) {
  struct Case {
    ScheduleKind kind;
    std::int64_t at0, at_half, at1;
  };
  // linear: 8 + 24·r. cosine: 8 + 24·(1 − cos πr)/2, cos(π/2) in fp32 is −4.4e-8, so 20.000001 -> 20.
  // bell: 1 − 4(r − 0.5)² is 0, 1, 0. bell_gaussian:σ is (e0 − e0)/(1 − e0) = 0 at r = 0, 1 and 1 at 0.5.
  const Case cases[] = {
      {ScheduleKind::kLinear, 8, 20, 32},
      {ScheduleKind::kLinearReverse, 32, 20, 8},
      {ScheduleKind::kCosine, 8, 20, 32},
      {ScheduleKind::kCosineReverse, 32, 20, 8},
      {ScheduleKind::kBell, 8, 32, 8},
      {ScheduleKind::kBellGaussian, 8, 32, 8},
      {ScheduleKind::kBellGaussianReverse, 32, 8, 32},
  };
  for (const Case& c : cases) {
    const KSchedule k = make(c.kind, 8, 32, 0.22f);
    EXPECT_EQ(scheduled_k(k, 0.0f), c.at0) << schedule_name(c.kind);
    EXPECT_EQ(scheduled_k(k, 0.5f), c.at_half) << schedule_name(c.kind);
    EXPECT_EQ(scheduled_k(k, 1.0f), c.at1) << schedule_name(c.kind);
  }
}

// The docs/routing.md 3.4 formula re-written for the tests, every operation in the contract's fp32 order
// (the test target is built with -ffp-contract=off). Shares only portable_exp / portable_cos with the code
// under test; those are tested against float64 in reference/numerics/tests/transcendental_test.cpp.
constexpr float kPiFp32 = 0x1.921fb6p1f;

float oracle_cosine(float rho) { return 0.5f * (1.0f + portable_cos(kPiFp32 * (1.0f - rho))); }

float oracle_gaussian(float r, float sigma) {
  const float two_var = 2.0f * (sigma * sigma);
  const float e0 = portable_exp(-0.25f / two_var);
  const float d = r - 0.5f;
  const float g = (portable_exp(-(d * d) / two_var) - e0) / (1.0f - e0);
  return std::clamp(g, 0.0f, 1.0f);
}

float oracle_s(const Schedule& schedule, float r) {
  const float d = r - 0.5f;
  switch (schedule.kind) {
    case ScheduleKind::kLinear:
      return r;
    case ScheduleKind::kLinearReverse:
      return 1.0f - r;
    case ScheduleKind::kCosine:
      return oracle_cosine(r);
    case ScheduleKind::kCosineReverse:
      return oracle_cosine(1.0f - r);
    case ScheduleKind::kBell:
      return std::clamp(1.0f - 4.0f * (d * d), 0.0f, 1.0f);
    case ScheduleKind::kBellGaussian:
      return oracle_gaussian(r, schedule.sigma);
    case ScheduleKind::kBellGaussianReverse:
      return 1.0f - oracle_gaussian(r, schedule.sigma);
    case ScheduleKind::kStatic:
      break;
  }
  return 0.0f;
}

// k_b = clamp(round_half_even(float(k_min) + float(k_max − k_min)·s), k_min, k_max); std::nearbyint in the
// default rounding mode (to nearest, ties to even) instead of the code's round_half_even.
std::int64_t oracle_k(const KSchedule& k, float r) {
  if (k.schedule.kind == ScheduleKind::kStatic) return k.k;
  const float product = static_cast<float>(k.k_max - k.k_min) * oracle_s(k.schedule, r);
  const float sum = static_cast<float>(k.k_min) + product;
  return std::clamp(static_cast<std::int64_t>(std::nearbyint(sum)), k.k_min, k.k_max);
}

// Every schedule (the gaussians at two σ) over three k ranges.
std::vector<KSchedule> every_k_schedule() {
  std::vector<KSchedule> out;
  for (const auto& [k_min, k_max] : {std::pair{8, 32}, std::pair{1, 6}, std::pair{1, 64}}) {
    for (std::string_view name : schedule_names()) {
      for (float sigma : {0.22f, 0.1f}) {
        KSchedule k = make(parse_schedule(name).value().kind, k_min, k_max, sigma);
        if (!schedule_needs_sigma(k.schedule.kind) && sigma != 0.22f) continue;
        out.push_back(k);
      }
    }
  }
  return out;
}

TEST(Schedule, KPinnedForEveryMaskRatioOfEverySequenceLength) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::int64_t checked = 0;
  for (const KSchedule& k : every_k_schedule()) {
    for (int s : {1, 2, 3, 7, 64, 4096}) {
      for (int m = 0; m <= s; ++m) {
        const float r = static_cast<float>(m) / static_cast<float>(s);  // the empirical mask ratio
        ASSERT_EQ(scheduled_k(k, r), oracle_k(k, r))
            << schedule_name(k.schedule.kind) << " sigma " << k.schedule.sigma << " k " << k.k_min << ".."
            << k.k_max << " r = " << m << "/" << s;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 30 * (2 + 3 + 4 + 8 + 65 + 4097));  // 10 schedules × 3 ranges, Σ_S (S + 1) ratios
}

TEST(Schedule, CosineAgreesWithFloat64AwayFromTies) {
  // Independent of portable_cos: where k_min + (k_max − k_min)·(1 ∓ cos πr)/2 in float64 is not within 1e-4
  // of a .5 tie, the fp32 k_b must be its nearest integer.
  std::int64_t compared = 0;
  for (const KSchedule& k : every_k_schedule()) {
    const ScheduleKind kind = k.schedule.kind;
    if (kind != ScheduleKind::kCosine && kind != ScheduleKind::kCosineReverse) continue;
    for (int s : {1, 2, 3, 7, 64, 4096}) {
      for (int m = 0; m <= s; ++m) {
        const float r = static_cast<float>(m) / static_cast<float>(s);
        const double c = std::cos(std::acos(-1.0) * static_cast<double>(r));
        const double value = (kind == ScheduleKind::kCosine ? 1.0 - c : 1.0 + c) / 2.0;
        const double exact = static_cast<double>(k.k_min) + static_cast<double>(k.k_max - k.k_min) * value;
        if (std::fabs(exact - std::floor(exact) - 0.5) < 1e-4) continue;
        ASSERT_EQ(scheduled_k(k, r), std::llround(exact)) << schedule_name(kind) << " r = " << m << "/" << s;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 20000);
}

TEST(Schedule, CosineFollowsTheRuledOperationOrderAtATie) {
  // docs/routing.md 3.4: s = 0.5·(1 + cos(π·(1 − ρ))). cosine, k 1..6, r = 1/2 (S = 2, m = 1), by hand:
  //   π_fp32·(1 − 0.5) = 1.5707964 (exact halving), cos of it = −4.371139e-8 (0xb33bbd2e);
  //   1 + (−4.371139e-8): the fp32 neighbours are 1 and 1 − 2^-24 (5.96e-8 below), the latter nearer,
  //   so s = 0.5·(1 − 2^-24) = 0.49999997; 5·s = 2.5 − 1.49e-7 rounds to 2.5 − 2^-22 = 2.4999998;
  //   1 + 2.4999998 = 3.4999998 (exact), so k_b = 3.
  // The order (1 − cos πr)/2 gives 1 − (−4.37e-8) = 1 (rounded), s = 0.5, 1 + 2.5 = 3.5 -> 4 (tie to even):
  // a different k from the same mathematics, which is why the order is part of the contract.
  EXPECT_EQ(float_bits(portable_cos(kPiFp32 * 0.5f)), 0xb33bbd2eu);
  const Schedule cosine{ScheduleKind::kCosine};
  const Schedule cosine_reverse{ScheduleKind::kCosineReverse};
  EXPECT_EQ(schedule_value(cosine, 0.5f), 0x1.fffffep-2f);
  EXPECT_EQ(schedule_value(cosine_reverse, 0.5f), 0x1.fffffep-2f);  // ρ = 1 − 0.5 = 0.5: the same value
  EXPECT_EQ(scheduled_k(make(ScheduleKind::kCosine, 1, 6), 0.5f), 3);
  EXPECT_EQ(scheduled_k(make(ScheduleKind::kCosineReverse, 1, 6), 0.5f), 3);
  // Endpoints: r = 0 gives cos(π_fp32) = −1 (rounded) so s = 0; r = 1 gives cos(0) = 1 so s = 1.
  EXPECT_EQ(schedule_value(cosine, 0.0f), 0.0f);
  EXPECT_EQ(schedule_value(cosine, 1.0f), 1.0f);
  EXPECT_EQ(schedule_value(cosine_reverse, 0.0f), 1.0f);
  EXPECT_EQ(schedule_value(cosine_reverse, 1.0f), 0.0f);
}

TEST(Schedule, StaticIgnoresMaskRatio) {
  const KSchedule k = make(ScheduleKind::kStatic);
  EXPECT_EQ(scheduled_k(k, 0.0f), 20);
  EXPECT_EQ(scheduled_k(k, 0.7f), 20);
  EXPECT_EQ(scheduled_k(k, 1.0f), 20);
}

TEST(Schedule, ValuesMatchDoubleFormulas) {
  const Schedule bell_gauss{ScheduleKind::kBellGaussian, 0.22f};
  const Schedule bell_gauss_rev{ScheduleKind::kBellGaussianReverse, 0.22f};
  for (double r : {0.0, 0.1, 0.25, 0.4, 0.5, 0.65, 0.9, 1.0}) {
    const auto rf = static_cast<float>(r);
    const double pi = std::acos(-1.0);
    const double sigma = 0.22;
    const double e0 = std::exp(-0.25 / (2 * sigma * sigma));
    const double gauss = (std::exp(-(r - 0.5) * (r - 0.5) / (2 * sigma * sigma)) - e0) / (1 - e0);
    EXPECT_NEAR(schedule_value({ScheduleKind::kLinear}, rf), r, 1e-7);
    EXPECT_NEAR(schedule_value({ScheduleKind::kLinearReverse}, rf), 1 - r, 1e-7);
    EXPECT_NEAR(schedule_value({ScheduleKind::kCosine}, rf), (1 - std::cos(pi * r)) / 2, 1e-6);
    EXPECT_NEAR(schedule_value({ScheduleKind::kCosineReverse}, rf), (1 + std::cos(pi * r)) / 2, 1e-6);
    EXPECT_NEAR(schedule_value({ScheduleKind::kBell}, rf), std::max(0.0, 1 - 4 * (r - 0.5) * (r - 0.5)),
                1e-6);
    EXPECT_NEAR(schedule_value(bell_gauss, rf), std::clamp(gauss, 0.0, 1.0), 1e-6);
    EXPECT_NEAR(schedule_value(bell_gauss_rev, rf), 1 - std::clamp(gauss, 0.0, 1.0), 1e-6);
  }
  // bell_gaussian:0.22 at r = 0.25: e0 = exp(-0.25/0.0968) = 0.075574, exp(-0.0625/0.0968) = 0.524316,
  // s = (0.524316 - 0.075574) / 0.924426 = 0.485428 -> k = round(8 + 24·0.485428 = 19.650) = 20.
  EXPECT_NEAR(schedule_value(bell_gauss, 0.25f), 0.485428, 1e-5);
  EXPECT_EQ(scheduled_k(make(ScheduleKind::kBellGaussian, 8, 32, 0.22f), 0.25f), 20);
}

TEST(Schedule, RoundHalfEven) {
  EXPECT_EQ(round_half_even(0.5f), 0.0f);
  EXPECT_EQ(round_half_even(1.5f), 2.0f);
  EXPECT_EQ(round_half_even(2.5f), 2.0f);
  EXPECT_EQ(round_half_even(3.5f), 4.0f);
  EXPECT_EQ(round_half_even(12.5f), 12.0f);
  EXPECT_EQ(round_half_even(std::nextafter(2.5f, 0.0f)), 2.0f);
  EXPECT_EQ(round_half_even(std::nextafter(2.5f, 3.0f)), 3.0f);
  EXPECT_EQ(round_half_even(7.0f), 7.0f);
}

TEST(Schedule, KUsesHalfEvenRounding) {
  // linear 8..32 at r = 0.0625: 8 + 24·0.0625 = 9.5 -> 10; at r = 0.1875: 8 + 4.5 = 12.5 -> 12.
  const KSchedule linear = make(ScheduleKind::kLinear);
  EXPECT_EQ(scheduled_k(linear, 0.0625f), 10);
  EXPECT_EQ(scheduled_k(linear, 0.1875f), 12);
  // linear_reverse 1..3 at r = 0.25: 1 + 2·0.75 = 2.5 -> 2.
  EXPECT_EQ(scheduled_k(make(ScheduleKind::kLinearReverse, 1, 3), 0.25f), 2);
}

TEST(Schedule, ParseNamesAndSigma) {
  for (std::string_view name : schedule_names()) {
    const bool gauss = name.starts_with("bell_gaussian");
    const std::string text = gauss ? std::string(name) + ":0.22" : std::string(name);
    const Result<Schedule> parsed = parse_schedule(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(schedule_name(parsed->kind), name);
    if (gauss) {
      EXPECT_EQ(parsed->sigma, 0.22f);
    }
  }
}

TEST(Schedule, ParseErrors) {
  EXPECT_EQ(parse_schedule("bogus", "router.schedule").status().message(),
            "router.schedule: must be one of {static, linear, linear_reverse, cosine, cosine_reverse, bell, "
            "bell_gaussian, bell_gaussian_reverse} (gaussian ones as name:sigma), got \"bogus\"");
  const Result<Schedule> no_sigma = parse_schedule("bell_gaussian");
  ASSERT_TRUE(no_sigma.ok());
  EXPECT_EQ(no_sigma->sigma, 0.0f);
  EXPECT_EQ(parse_schedule("linear:0.3").status().message(),
            "schedule: schedule \"linear\" takes no \":sigma\" suffix, got \"linear:0.3\"");
  EXPECT_EQ(parse_schedule("bell_gaussian:-1").status().message(),
            "schedule: sigma after ':' must be a finite number > 0, got \"-1\"");
  EXPECT_FALSE(parse_schedule("bell_gaussian:0.2x").ok());
  EXPECT_EQ(parse_schedule("bell_gaussian:0.2x").status().code(), StatusCode::kInvalidArgument);
}

TEST(Schedule, ValidateNamesFieldsWithPrefix) {
  KSchedule k = make(ScheduleKind::kLinear);
  EXPECT_TRUE(validate_k_schedule(k, 64, "router.").ok());
  k.k_min = 9;
  k.k_max = 8;
  EXPECT_EQ(validate_k_schedule(k, 64, "router.").message(),
            "router.k_min: must be <= router.k_max, got 9 > 8");
  k = make(ScheduleKind::kLinear, 8, 65);
  EXPECT_EQ(validate_k_schedule(k, 64, "router.").message(), "router.k_max: must be in [1, 64], got 65");
  k = make(ScheduleKind::kLinear, 0, 8);
  EXPECT_EQ(validate_k_schedule(k, 64).message(), "k_min: must be in [1, 64], got 0");
  k = make(ScheduleKind::kStatic);
  k.k = 0;
  EXPECT_EQ(validate_k_schedule(k, 64).message(), "k: must be in [1, 64], got 0");
  k = make(ScheduleKind::kBellGaussian, 8, 32, 0.0f);
  EXPECT_EQ(validate_k_schedule(k, 64, "router.").message(),
            "router.sigma: required (> 0) for schedule bell_gaussian (or write \"bell_gaussian:sigma\")");
  k = make(ScheduleKind::kBellGaussianReverse, 8, 32, -0.5f);
  EXPECT_EQ(validate_k_schedule(k, 64).message(), "sigma: must be a finite number > 0, got -0.5");
  // A static schedule ignores k_min / k_max.
  k = make(ScheduleKind::kStatic, 9, 8);
  EXPECT_TRUE(validate_k_schedule(k, 64).ok());
}

}  // namespace
}  // namespace eps::routing
