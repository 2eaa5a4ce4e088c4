// The regression gate (docs/results.md 9.2): Mann-Whitney U against hand-computed values and a brute-force
// permutation oracle, case keys, and run_regression_gate' verdicts and refusals.
#include "results/regression_gate.hpp"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(MannWhitney, FullySeparatedNineVersusNineIsExact) {
  // Every base time is below every new time: U = 0, the single most extreme of C(18, 9) = 48620
  // equally likely orderings on each side, so two-sided p = 2 / 48620.
  const std::vector<double> base = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<double> next = {10, 11, 12, 13, 14, 15, 16, 17, 18};
  Result<MannWhitney> mw = mann_whitney_u(base, next);
  ASSERT_TRUE(mw.ok());
  EXPECT_TRUE(mw->exact);
  EXPECT_EQ(mw->u, 0);
  EXPECT_DOUBLE_EQ(mw->p_value, 2.0 / 48620.0);
  Result<MannWhitney> reversed = mann_whitney_u(next, base);
  ASSERT_TRUE(reversed.ok());
  EXPECT_EQ(reversed->u, 81);  // m n - U = 9 * 9 - 0
  EXPECT_DOUBLE_EQ(reversed->p_value, 2.0 / 48620.0);
}

TEST(MannWhitney, ThreeVersusThreeByHand) {
  // a = {1, 2, 4}, b = {3, 5, 6}: only 4 > 3, so U = 1. Of the C(6, 3) = 20 orderings, U = 0 has one
  // ({1,2,3} low) and U = 1 has one, so P(U <= 1) = 2/20 and the two-sided p = 0.2.
  Result<MannWhitney> mw = mann_whitney_u(std::vector<double>{1, 2, 4}, std::vector<double>{3, 5, 6});
  ASSERT_TRUE(mw.ok());
  EXPECT_TRUE(mw->exact);
  EXPECT_EQ(mw->u, 1);
  EXPECT_DOUBLE_EQ(mw->p_value, 0.2);
}

// Oracle: enumerate every split of the pooled values into groups of sizes m and n.
double brute_force_p(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  auto u_of = [](const std::vector<double>& x, const std::vector<double>& y) {
    double u = 0;
    for (double p : x)
      for (double q : y) u += p > q ? 1 : (p == q ? 0.5 : 0);
    return u;
  };
  const double observed = u_of(a, b);
  std::vector<bool> pick(pooled.size(), false);
  std::fill(pick.begin(), pick.begin() + static_cast<std::ptrdiff_t>(a.size()), true);
  double total = 0, low = 0, high = 0;
  do {
    std::vector<double> x, y;
    for (std::size_t i = 0; i < pooled.size(); ++i) (pick[i] ? x : y).push_back(pooled[i]);
    const double u = u_of(x, y);
    total += 1;
    low += u <= observed;
    high += u >= observed;
  } while (std::prev_permutation(pick.begin(), pick.end()));
  return std::min(1.0, 2 * std::min(low, high) / total);
}

TEST(MannWhitney, ExactMatchesPermutationOracle) {
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> cases = {
      {{1.5, 7, 3, 9.25, 4}, {2, 8, 6, 5}},
      {{10, 20, 30, 40, 50, 60}, {15, 25, 35}},
      {{5}, {1, 2, 3, 4, 6, 7}},
      {{3, 1, 4}, {15, 9, 2, 6, 5, 35, 8}},
  };
  for (const auto& [a, b] : cases) {
    Result<MannWhitney> mw = mann_whitney_u(a, b);
    ASSERT_TRUE(mw.ok());
    EXPECT_TRUE(mw->exact);
    EXPECT_NEAR(mw->p_value, brute_force_p(a, b), 1e-12);
  }
}

TEST(MannWhitney, NormalApproximationWithTiesByHand) {
  // a = {1, 1, 2}, b = {2, 3, 3}: ties, so the normal approximation. U = 0.5 (2 vs 2 is a tie), mean
  // m n / 2 = 4.5; ties of sizes 2, 2, 2 give sum(t^3 - t) = 18, so sigma^2 = 9/12 (7 - 18/30) = 4.8;
  // z = (4 - 0.5) / sqrt(4.8) = 1.5975241; p = erfc(z / sqrt 2) = 0.11014892 (Python math.erfc).
  Result<MannWhitney> mw = mann_whitney_u(std::vector<double>{1, 1, 2}, std::vector<double>{2, 3, 3});
  ASSERT_TRUE(mw.ok());
  EXPECT_FALSE(mw->exact);
  EXPECT_EQ(mw->u, 0.5);
  EXPECT_NEAR(mw->p_value, 0.11014892418594698, 1e-12);
}

TEST(MannWhitney, NormalApproximationAboveTheExactLimit) {
  // 21 vs 21 fully separated: U = 0, mean 220.5, sigma^2 = 21 * 21 / 12 * 43 = 1580.25, sigma = 39.752358;
  // z = 220 / sigma = 5.5342628; p = erfc(z / sqrt 2) = 3.1253999984e-08 (Python math.erfc).
  std::vector<double> low, high;
  for (int i = 0; i < 21; ++i) {
    low.push_back(i);
    high.push_back(100 + i);
  }
  Result<MannWhitney> mw = mann_whitney_u(low, high);
  ASSERT_TRUE(mw.ok());
  EXPECT_FALSE(mw->exact);
  EXPECT_NEAR(mw->p_value / 3.125399998400882e-08, 1.0, 1e-9);
}

TEST(MannWhitney, AllTiedAndEmpty) {
  Result<MannWhitney> mw = mann_whitney_u(std::vector<double>{2, 2, 2}, std::vector<double>{2, 2});
  ASSERT_TRUE(mw.ok());
  EXPECT_EQ(mw->u, 3);  // 6 ties * 0.5
  EXPECT_EQ(mw->p_value, 1.0);
  EXPECT_EQ(mann_whitney_u(std::vector<double>{}, std::vector<double>{1}).status().code(),
            StatusCode::kInvalidArgument);
}

CaseResult make_case(std::string op, std::vector<double> times, std::int64_t tokens = 128) {
  CaseResult c;
  c.op = std::move(op);
  c.transport = "mpi";
  c.mode = "ht-rank-major";
  c.dtype = "bf16";
  c.sizes = {{"tokens", tokens}, {"hidden", 256}};
  c.times_us = std::move(times);
  c.check = CheckOutcome{};
  return c;
}

TEST(CaseKey, NamesEveryIdentityFieldWithSortedSizes) {
  CaseResult c = make_case("dispatch", {1});
  EXPECT_EQ(case_key(c), "dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128");
  CaseResult swapped = c;
  std::reverse(swapped.sizes.begin(), swapped.sizes.end());
  EXPECT_EQ(case_key(swapped), case_key(c));
  swapped.dtype = "fp8";
  EXPECT_NE(case_key(swapped), case_key(c));
}

TEST(ParseFraction, PercentAndPlain) {
  EXPECT_DOUBLE_EQ(*parse_fraction("10%", "--threshold"), 0.10);
  EXPECT_DOUBLE_EQ(*parse_fraction("2.5%", "--threshold"), 0.025);
  EXPECT_DOUBLE_EQ(*parse_fraction("0.05", "--alpha"), 0.05);
  EXPECT_EQ(parse_fraction("ten", "--threshold").status().message(),
            "--threshold: expected a number or a percentage such as 10%, got 'ten'");
  EXPECT_FALSE(parse_fraction("10%%", "--threshold").ok());
  EXPECT_FALSE(parse_fraction("", "--alpha").ok());
}

const std::vector<double> kTimes = {100, 102, 98, 101, 99, 103, 97, 100.5, 99.5};

std::vector<double> scaled(double factor) {
  std::vector<double> out;
  for (double t : kTimes) out.push_back(t * factor);
  return out;
}

ResultsDocument document(std::vector<CaseResult> cases, std::string fingerprint = "00000000000000aa") {
  ResultsDocument doc;
  doc.schema_version = 1;
  doc.header.platform = Json{{"fingerprint", fingerprint}};
  for (CaseResult& c : cases) doc.cases.push_back(CaseRecord{std::move(c), SummaryStats{}});
  return doc;
}

TEST(CompareResults, IdenticalDocumentsPass) {
  const ResultsDocument doc = document({make_case("dispatch", kTimes), make_case("combine", kTimes)});
  Result<GateResult> c = run_regression_gate(doc, doc, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases.size(), 2u);
  EXPECT_EQ(c->count(Verdict::kUnchanged), 2u);
  EXPECT_EQ(c->cases[0].ratio, 1.0);
  EXPECT_EQ(c->exit_code(), 0);
}

// docs/results.md 9.3: direct over shm and direct over libfabric:shm on one machine are different cases,
// never compared, even when every other field matches (a regression of one would otherwise hide behind the
// other).
TEST(CompareResults, DifferentFabricsAreUnmatchedNotCompared) {
  CaseResult shm = make_case("dispatch", kTimes);
  shm.transport = "direct";
  shm.identity = {{"fabric", "shm"}, {"signal", "fabric-order"}, {"chaos", "off"}};
  CaseResult libfabric_shm = shm;
  libfabric_shm.identity["fabric"] = "libfabric:shm";
  libfabric_shm.times_us = scaled(3.0);  // would be a regression if it were compared with shm
  Result<GateResult> c = run_regression_gate(document({shm}), document({libfabric_shm}), {});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->cases.empty());
  ASSERT_EQ(c->only_in_base.size(), 1u);
  ASSERT_EQ(c->only_in_new.size(), 1u);
  EXPECT_NE(c->only_in_base[0].find("fabric=shm"), std::string::npos) << c->only_in_base[0];
  EXPECT_NE(c->only_in_new[0].find("fabric=libfabric:shm"), std::string::npos) << c->only_in_new[0];
  // docs/results.md 9.2: nothing was compared, so the gate fails and names the field that differs.
  EXPECT_EQ(c->exit_code(), 1);
  ASSERT_EQ(c->identity_differences.size(), 1u);
  EXPECT_EQ(c->identity_differences[0].field, "fabric");
  EXPECT_EQ(c->identity_differences[0].base_values, std::vector<std::string>{"shm"});
  EXPECT_EQ(c->identity_differences[0].new_values, std::vector<std::string>{"libfabric:shm"});
}

TEST(CaseKey, IdentityEntriesArePartOfTheKey) {
  CaseResult c = make_case("dispatch", {1});
  c.identity = {{"signal", "imm-seq"}, {"fabric", "shm"}};
  EXPECT_EQ(case_key(c), "dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128 fabric=shm signal=imm-seq");
  CaseResult other = c;
  other.identity["signal"] = "recv-count";
  EXPECT_NE(case_key(other), case_key(c));
}

TEST(CompareResults, OnePointFiveTimesSlowerRegresses) {
  Result<GateResult> c = run_regression_gate(document({make_case("dispatch", kTimes)}),
                                             document({make_case("dispatch", scaled(1.5))}), {});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->cases.size(), 1u);
  EXPECT_EQ(c->cases[0].verdict, Verdict::kRegression);
  EXPECT_EQ(c->cases[0].base_median, 100);  // 5th smallest of 9
  EXPECT_EQ(c->cases[0].new_median, 150);
  EXPECT_DOUBLE_EQ(c->cases[0].ratio, 1.5);
  EXPECT_DOUBLE_EQ(c->cases[0].test.p_value, 2.0 / 48620.0);  // fully separated, 9 vs 9
  EXPECT_EQ(c->exit_code(), 1);
  EXPECT_NE(regression_gate_report(*c, {}).find("regressions (1):"), std::string::npos);
}

TEST(CompareResults, FivePercentSlowerIsBelowTheThreshold) {
  Result<GateResult> c = run_regression_gate(document({make_case("dispatch", kTimes)}),
                                             document({make_case("dispatch", scaled(1.05))}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases[0].verdict, Verdict::kUnchanged);
  EXPECT_EQ(c->exit_code(), 0);
  // The same slowdown does regress under a 3% threshold: 105 / 100 > 1.03 and the samples separate enough.
  Result<GateResult> strict =
      run_regression_gate(document({make_case("dispatch", kTimes)}),
                          document({make_case("dispatch", scaled(1.05))}), {0.03, 0.05, false});
  ASSERT_TRUE(strict.ok());
  EXPECT_LT(strict->cases[0].test.p_value, 0.05);
  EXPECT_EQ(strict->cases[0].verdict, Verdict::kRegression);
}

TEST(CompareResults, LargeButInsignificantSlowdownIsNotARegression) {
  // Medians 100 vs 150 but only one repetition each: the smallest exact p is 2/2 = 1.
  Result<GateResult> c = run_regression_gate(document({make_case("dispatch", {100})}),
                                             document({make_case("dispatch", {150})}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases[0].test.p_value, 1.0);
  EXPECT_EQ(c->cases[0].verdict, Verdict::kUnchanged);
}

TEST(CompareResults, FasterIsAnImprovementAndPasses) {
  Result<GateResult> c = run_regression_gate(document({make_case("dispatch", kTimes)}),
                                             document({make_case("dispatch", scaled(0.5))}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases[0].verdict, Verdict::kImprovement);
  EXPECT_EQ(c->exit_code(), 0);
}

TEST(CompareResults, FingerprintsMustMatchUnlessForced) {
  const ResultsDocument base = document({make_case("dispatch", kTimes)}, "00000000000000aa");
  const ResultsDocument next = document({make_case("dispatch", kTimes)}, "00000000000000bb");
  Result<GateResult> refused = run_regression_gate(base, next, {});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      refused.status().message().find("fingerprints differ: BASE 00000000000000aa vs NEW 00000000000000bb"),
      std::string::npos);
  EXPECT_NE(refused.status().message().find("use --force"), std::string::npos);
  Result<GateResult> forced = run_regression_gate(base, next, {0.10, 0.05, true});
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->exit_code(), 0);
}

TEST(CompareResults, FailedCheckInNewFails) {
  CaseResult failed = make_case("dispatch", kTimes);
  failed.check = CheckOutcome{false, 3, "token 0"};
  Result<GateResult> c =
      run_regression_gate(document({make_case("dispatch", kTimes)}), document({failed}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->failed_checks,
            std::vector<std::string>{"dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128"});
  EXPECT_EQ(c->exit_code(), 1);
}

TEST(CompareResults, UnmatchedCasesAreListedNotFailed) {
  Result<GateResult> c =
      run_regression_gate(document({make_case("dispatch", kTimes), make_case("combine", kTimes)}),
                          document({make_case("dispatch", kTimes), make_case("dispatch", kTimes, 256)}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases.size(), 1u);
  EXPECT_EQ(c->only_in_base,
            std::vector<std::string>{"combine/mpi/ht-rank-major/bf16 hidden=256 tokens=128"});
  EXPECT_EQ(c->only_in_new,
            std::vector<std::string>{"dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=256"});
  EXPECT_EQ(c->exit_code(), 0);
  EXPECT_EQ(regression_gate_report(*c, {}).find("no case matched"), std::string::npos);
}

// docs/results.md 9.2: a gate that matched no case fails (exit 1) and names every identity field whose values
// differ between the files, with the values; --allow-unmatched (GateOptions::allow_unmatched) passes it.
TEST(CompareResults, NoMatchedCaseFailsNamingTheFieldsThatDiffer) {
  CaseResult base = make_case("dispatch", kTimes);
  base.identity = {{"fabric", "shm"}, {"preset", "smoke"}};
  CaseResult next = make_case("dispatch", kTimes, 256);
  next.identity = {{"fabric", "libfabric:tcp"}, {"preset", "smoke"}, {"quantize", "amax"}};
  const ResultsDocument base_doc = document({base}), new_doc = document({next});
  Result<GateResult> c = run_regression_gate(base_doc, new_doc, {});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->cases.empty());
  EXPECT_EQ(c->only_in_base.size(), 1u);
  EXPECT_EQ(c->only_in_new.size(), 1u);
  EXPECT_EQ(c->exit_code(), 1);
  std::vector<std::string> fields;
  for (const IdentityDifference& d : c->identity_differences) fields.push_back(d.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"fabric", "quantize", "tokens"}));
  EXPECT_EQ(c->identity_differences[1].base_values, std::vector<std::string>{"(none)"});
  EXPECT_EQ(c->identity_differences[2].new_values, std::vector<std::string>{"256"});
  const std::string report = regression_gate_report(*c, {});
  EXPECT_NE(report.find("unchanged: 0 of 0 matched cases"), std::string::npos) << report;
  EXPECT_NE(report.find("  fabric: BASE shm; NEW libfabric:tcp\n"), std::string::npos) << report;
  EXPECT_NE(report.find("  quantize: BASE (none); NEW amax\n"), std::string::npos) << report;
  EXPECT_NE(
      report.find("verdict: FAIL (0 regression(s), 0 failed check(s), no case matched: the files differ "
                  "in fabric, quantize, tokens (--allow-unmatched passes this))"),
      std::string::npos)
      << report;

  GateOptions allow;
  allow.allow_unmatched = true;
  Result<GateResult> allowed = run_regression_gate(base_doc, new_doc, allow);
  ASSERT_TRUE(allowed.ok());
  EXPECT_EQ(allowed->exit_code(), 0);
  EXPECT_NE(regression_gate_report(*allowed, allow).find("verdict: PASS"), std::string::npos);
  EXPECT_NE(regression_gate_report(*allowed, allow).find("(allowed by --allow-unmatched)"),
            std::string::npos);
  // A failed check in NEW still fails under --allow-unmatched.
  next.check = CheckOutcome{false, 1, "row 0"};
  Result<GateResult> failed = run_regression_gate(base_doc, document({next}), allow);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->exit_code(), 1);
}

// Every field takes the same values in both files, only in other combinations: still no match, and the report
// says so instead of naming a field.
TEST(CompareResults, NoMatchedCaseWithTheSameValuesInOtherCombinations) {
  CaseResult a = make_case("dispatch", kTimes, 64);
  CaseResult b = make_case("combine", kTimes, 128);
  CaseResult c_case = make_case("dispatch", kTimes, 128);
  CaseResult d = make_case("combine", kTimes, 64);
  Result<GateResult> c = run_regression_gate(document({a, b}), document({c_case, d}), {});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cases.empty());
  EXPECT_TRUE(c->identity_differences.empty());
  EXPECT_EQ(c->exit_code(), 1);
  EXPECT_NE(regression_gate_report(*c, {}).find("in other combinations"), std::string::npos);
}

// docs/results.md 9.5: the report warns how many matched cases ran oversubscribed on each side, with the note
// of that side's document; the verdict does not change.
TEST(CompareResults, WarnsWhenASideRanOversubscribed) {
  ResultsDocument base = document({make_case("dispatch", kTimes), make_case("combine", kTimes)});
  ResultsDocument next = base;
  next.header.oversubscribed =
      Json{{"note", "4 ranks on 2 CPUs: timings measure the scheduler, not the transport"}};
  next.cases[0].result.oversubscribed = true;
  next.cases[1].result.oversubscribed = true;
  Result<GateResult> c = run_regression_gate(base, next, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->oversubscribed_in_base, 0u);
  EXPECT_EQ(c->oversubscribed_in_new, 2u);
  EXPECT_EQ(c->exit_code(), 0);
  const std::string report = regression_gate_report(*c, {});
  EXPECT_NE(report.find("# warning: NEW: 2 of 2 matched cases ran oversubscribed (4 ranks on 2 CPUs: timings "
                        "measure the scheduler, not the transport)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("# warning: BASE"), std::string::npos) << report;
  Result<GateResult> neither = run_regression_gate(base, base, {});
  ASSERT_TRUE(neither.ok());
  EXPECT_EQ(regression_gate_report(*neither, {}).find("oversubscribed"), std::string::npos);
}

TEST(CompareResults, RefusesEmptyDuplicateAndBadOptions) {
  const ResultsDocument doc = document({make_case("dispatch", kTimes)});
  EXPECT_EQ(run_regression_gate(document({}), doc, {}).status().message(),
            "BASE: results: empty results list, nothing to compare");
  EXPECT_EQ(
      run_regression_gate(doc, document({make_case("dispatch", kTimes), make_case("dispatch", kTimes)}), {})
          .status()
          .message(),
      "NEW: results[1]: duplicate case dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128");
  EXPECT_FALSE(run_regression_gate(doc, doc, {-0.1, 0.05, false}).ok());
  EXPECT_FALSE(run_regression_gate(doc, doc, {0.1, 0.0, false}).ok());
}

}  // namespace
}  // namespace eps
