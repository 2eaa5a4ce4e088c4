// The gated line fits of docs/model.md 16.2 on synthetic series whose lines are known by construction.
#include "perf/model/link_fit.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eps::model {
namespace {

// y = 3 µs + x / (2 GB/s): 2e9 B/s is 2000 B/µs, so 0.0005 µs per byte.
std::vector<FitPoint> exact_line() {
  std::vector<FitPoint> p;
  for (double x = 8; x <= 2097152; x *= 4) p.push_back({x, 3.0 + x * 0.0005});
  return p;
}

TEST(LinkFit, ExactLineIsRecovered) {
  const Result<GatedFit> fit = fit_gated(exact_line(), "shm put-bw");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_FALSE(fit->withheld);
  ASSERT_EQ(fit->ranges.size(), 1u);
  EXPECT_NEAR(fit->ranges[0].intercept, 3.0, 1e-9);
  EXPECT_NEAR(fit->ranges[0].slope, 0.0005, 1e-12);
  EXPECT_NEAR(fit->ranges[0].r2, 1.0, 1e-12);
  EXPECT_NEAR(line_gbps(fit->ranges[0]), 2.0, 1e-9);
  EXPECT_EQ(fit->ranges[0].residuals.size(), exact_line().size());
  for (double r : fit->ranges[0].residuals) EXPECT_NEAR(r, 0.0, 1e-6);
  EXPECT_NEAR(fit->predict(1e6), 503.0, 1e-6);
}

// Ordinary least squares by hand: x = 1, 2, 3, y = 1, 3, 2: mean x 2, mean y 2, Sxy = 1, Sxx = 2, slope 0.5,
// intercept 1, fitted 1.5, 2, 2.5, residuals -0.5, 1, -0.5, SS_res 1.5, SS_tot 2, R^2 0.25.
TEST(LinkFit, LeastSquaresMatchesHandComputation) {
  const std::vector<FitPoint> p = {{1, 1}, {2, 3}, {3, 2}};
  const Result<LineFit> line = fit_line(p, "hand");
  ASSERT_TRUE(line.ok());
  EXPECT_DOUBLE_EQ(line->slope, 0.5);
  EXPECT_DOUBLE_EQ(line->intercept, 1.0);
  EXPECT_DOUBLE_EQ(line->r2, 0.25);
  ASSERT_EQ(line->residuals.size(), 3u);
  EXPECT_DOUBLE_EQ(line->residuals[0], -0.5);
  EXPECT_DOUBLE_EQ(line->residuals[1], 1.0);
  EXPECT_DOUBLE_EQ(line->residuals[2], -0.5);
}

// A knee: latency-bound small messages (10 µs + 1 ns/B) then a slower bulk path (x / 100 B/µs): one line
// leaves the small sizes far off, two ranges fit each exactly. With equal weights the big sizes alone decide
// R^2 (0.9999...: the knee would pass); relative weights see it.
TEST(LinkFit, KneeIsFittedAsTwoRanges) {
  std::vector<FitPoint> p;
  for (double x : {8.0, 64.0, 512.0, 4096.0}) p.push_back({x, 10.0 + x * 0.001});
  for (double x : {32768.0, 262144.0, 2097152.0}) p.push_back({x, -200.0 + x * 0.01});
  const Result<LineFit> absolute = fit_line(p, "knee");
  ASSERT_TRUE(absolute.ok());
  EXPECT_GT(absolute->r2, 0.999);
  const Result<LineFit> relative = fit_line(p, "knee", Weighting::kRelative);
  ASSERT_TRUE(relative.ok());
  EXPECT_LT(relative->r2, kMinR2);
  const Result<GatedFit> fit = fit_gated(p, "knee");
  ASSERT_TRUE(fit.ok());
  ASSERT_FALSE(fit->withheld) << fit->reason;
  ASSERT_EQ(fit->ranges.size(), 2u);
  EXPECT_NEAR(fit->ranges[0].slope, 0.001, 1e-9);
  EXPECT_NEAR(fit->ranges[1].slope, 0.01, 1e-9);
  EXPECT_DOUBLE_EQ(fit->ranges[0].x_max, 4096.0);
  EXPECT_NEAR(fit->predict(64.0), 10.064, 1e-9);
  EXPECT_NEAR(fit->predict(262144.0), 2421.44, 1e-6);
}

// Scatter that no line (nor two) explains: withheld, with R^2 in the reason, and never a bandwidth.
TEST(LinkFit, BadFitIsWithheldWithItsReason) {
  const std::vector<FitPoint> p = {{8, 50},    {32, 5},   {128, 60},   {512, 4},
                                   {2048, 55}, {8192, 6}, {32768, 58}, {131072, 7}};
  const Result<GatedFit> fit = fit_gated(p, "libfabric:tcp put-bw");
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->withheld);
  EXPECT_TRUE(fit->ranges.empty());
  EXPECT_NE(fit->reason.find("libfabric:tcp put-bw"), std::string::npos) << fit->reason;
  EXPECT_NE(fit->reason.find("R^2"), std::string::npos) << fit->reason;
  EXPECT_NE(fit->reason.find("no split"), std::string::npos) << fit->reason;
}

// Time that does not grow with bytes has no bandwidth: R^2 is 1 (every point on the flat line), slope 0.
TEST(LinkFit, FlatSeriesIsWithheld) {
  const std::vector<FitPoint> p = {{8, 4}, {64, 4}, {512, 4}, {4096, 4}};
  const Result<GatedFit> fit = fit_gated(p, "flat");
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->withheld);
  EXPECT_NE(fit->reason.find("slope"), std::string::npos);
}

TEST(LinkFit, TooFewOrDegeneratePointsAreRefused) {
  const std::vector<FitPoint> two = {{8, 1}, {16, 2}};
  const Result<GatedFit> few = fit_gated(two, "few");
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(few.status().message().find("at least 3"), std::string::npos);
  const std::vector<FitPoint> same = {{8, 1}, {8, 2}, {8, 3}};
  const Result<LineFit> line = fit_line(same, "same");
  ASSERT_FALSE(line.ok());
  EXPECT_NE(line.status().message().find("same size"), std::string::npos);
}

}  // namespace
}  // namespace eps::model
