// The statistics of results documents (docs/results.md 9.1, 9.2): the summary of a case's repetition times,
// bandwidths, the ceiling ratio, and the two-sided Mann–Whitney U test of the regression gate.
//
// `summarize`: percentiles are nearest-rank: pX is the ceil(X/100 * n)-th smallest sample (1-based; p0 would
// be the minimum); mean is the arithmetic mean; stdev is the sample standard deviation (n - 1 in the
// denominator; 0 for one sample). Empty input or a non-finite sample is kInvalidArgument.
//
// Mann–Whitney U (two-sided): U = #{(a, b): a > b} + 0.5 #{(a, b): a == b} over FIRST x SECOND. When both
// samples have at most kExactLimit values and the pooled sample has no ties, p is exact: the null
// distribution of U is counted with the recurrence N(m, n, u) = N(m-1, n, u-n) + N(m, n-1, u) over the
// C(m+n, m) equally likely orderings, and p = min(1, 2 min(P(U <= u), P(U >= u))). Otherwise the normal
// approximation with tie correction, sigma^2 = m n / 12 ((N + 1) - sum(t^3 - t) / (N (N - 1))), and
// continuity correction, z = (|U - m n / 2| - 0.5) / sigma, p = erfc(z / sqrt 2) (p = 1 when sigma = 0).
#pragma once

#include <cstddef>
#include <span>

#include "reference/common/status.hpp"

namespace eps {

struct SummaryStats {
  double min = 0;
  double p10 = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
  double mean = 0;
  double stdev = 0;
  friend bool operator==(const SummaryStats&, const SummaryStats&) = default;
};

// The nearest-rank percentile `p` in (0, 100] of ascending `sorted` (non-empty).
double nearest_rank_percentile(std::span<const double> sorted, double p);
Result<SummaryStats> summarize(std::span<const double> samples);

// Gigabytes (1e9 B) per second for `bytes` moved in `time_us` microseconds; 0 when time_us <= 0.
double bandwidth_gbps(double bytes, double time_us);

// The ceiling's ratio (docs/results.md 9.4): ceiling us / case p50 (0 when either time is 0): below 1, the
// case is slower than the ceiling.
double ceiling_ratio(double ceiling_us, double case_p50_us);

inline constexpr std::size_t kExactLimit = 20;

struct MannWhitney {
  double u = 0;        // U of the first sample
  double p_value = 1;  // two-sided
  bool exact = false;  // exact distribution (true) or normal approximation
};

Result<MannWhitney> mann_whitney_u(std::span<const double> first, std::span<const double> second);

}  // namespace eps
