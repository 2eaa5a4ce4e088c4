#include "results/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace eps {

double nearest_rank_percentile(std::span<const double> sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * n));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

Result<SummaryStats> summarize(std::span<const double> samples) {
  if (samples.empty()) return invalid_argument("times_us", "needs at least one repetition, got none");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!std::isfinite(samples[i])) {
      return invalid_argument(fmt::format("times_us[{}]", i), "must be a finite time, got {}", samples[i]);
    }
  }
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  SummaryStats s;
  s.min = sorted.front();
  s.max = sorted.back();
  s.p10 = nearest_rank_percentile(sorted, 10);
  s.p50 = nearest_rank_percentile(sorted, 50);
  s.p90 = nearest_rank_percentile(sorted, 90);
  s.p99 = nearest_rank_percentile(sorted, 99);
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / static_cast<double>(samples.size());
  if (samples.size() > 1) {
    double squares = 0;
    for (double v : samples) squares += (v - s.mean) * (v - s.mean);
    s.stdev = std::sqrt(squares / static_cast<double>(samples.size() - 1));
  }
  return s;
}

double bandwidth_gbps(double bytes, double time_us) { return time_us > 0 ? bytes / (time_us * 1e3) : 0.0; }

double ceiling_ratio(double ceiling_us, double case_p50_us) {
  return ceiling_us > 0 && case_p50_us > 0 ? ceiling_us / case_p50_us : 0.0;
}

namespace {

// counts[u] = number of orderings of m values of one sample and n of the other with U = u.
std::vector<double> u_distribution(std::size_t m, std::size_t n) {
  // table[i][j] holds the distribution for (i, j); built row by row over i with j growing.
  std::vector<std::vector<std::vector<double>>> table(m + 1, std::vector<std::vector<double>>(n + 1));
  for (std::size_t i = 0; i <= m; ++i) {
    for (std::size_t j = 0; j <= n; ++j) {
      std::vector<double>& counts = table[i][j];
      counts.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        counts[0] = 1;
        continue;
      }
      // The largest pooled value is from the first sample (it beats all j others) or from the second.
      for (std::size_t u = 0; u < table[i - 1][j].size(); ++u) counts[u + j] += table[i - 1][j][u];
      for (std::size_t u = 0; u < table[i][j - 1].size(); ++u) counts[u] += table[i][j - 1][u];
    }
  }
  return table[m][n];
}

bool pooled_has_ties(std::span<const double> a, std::span<const double> b) {
  std::vector<double> pooled(a.begin(), a.end());
  pooled.insert(pooled.end(), b.begin(), b.end());
  std::sort(pooled.begin(), pooled.end());
  return std::adjacent_find(pooled.begin(), pooled.end()) != pooled.end();
}

double exact_p(std::size_t m, std::size_t n, double u) {
  const std::vector<double> counts = u_distribution(m, n);
  double total = 0, at_most = 0, at_least = 0;
  const auto whole_u = static_cast<std::size_t>(u);  // no ties: U is an integer
  for (std::size_t k = 0; k < counts.size(); ++k) {
    total += counts[k];
    if (k <= whole_u) at_most += counts[k];
    if (k >= whole_u) at_least += counts[k];
  }
  return std::min(1.0, 2.0 * std::min(at_most, at_least) / total);
}

double normal_p(std::span<const double> a, std::span<const double> b, double u) {
  const double m = static_cast<double>(a.size()), n = static_cast<double>(b.size());
  const double big_n = m + n;
  std::vector<double> pooled(a.begin(), a.end());
  pooled.insert(pooled.end(), b.begin(), b.end());
  std::sort(pooled.begin(), pooled.end());
  double tie_sum = 0;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j] == pooled[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_sum += t * t * t - t;
    i = j;
  }
  const double variance = m * n / 12.0 * ((big_n + 1) - tie_sum / (big_n * (big_n - 1)));
  if (!(variance > 0)) return 1.0;
  const double z = std::max(0.0, std::abs(u - m * n / 2.0) - 0.5) / std::sqrt(variance);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

}  // namespace

Result<MannWhitney> mann_whitney_u(std::span<const double> first, std::span<const double> second) {
  if (first.empty() || second.empty()) {
    return invalid_argument("times_us",
                            "Mann-Whitney U needs at least one repetition in each sample, got {} and {}",
                            first.size(), second.size());
  }
  MannWhitney result;
  for (double a : first) {
    for (double b : second) result.u += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
  }
  result.exact =
      first.size() <= kExactLimit && second.size() <= kExactLimit && !pooled_has_ties(first, second);
  result.p_value =
      result.exact ? exact_p(first.size(), second.size(), result.u) : normal_p(first, second, result.u);
  return result;
}

}  // namespace eps
