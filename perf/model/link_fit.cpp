#include "perf/model/link_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace eps::model {
namespace {

bool accepted(const LineFit& line) { return line.r2 >= kMinR2 && line.slope > 0; }

// Σ (residual / measured)^2 of a line fitted to `points`.
double relative_squared_residuals(const LineFit& line, std::span<const FitPoint> points) {
  double sum = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double r = line.residuals[i] / points[i].y;
    sum += r * r;
  }
  return sum;
}

}  // namespace

Result<LineFit> fit_line(std::span<const FitPoint> points, std::string_view what, Weighting weighting) {
  if (points.size() < static_cast<std::size_t>(kMinFitPoints)) {
    return invalid_argument(what, "a fit needs at least {} sizes, got {}", kMinFitPoints, points.size());
  }
  std::vector<double> weights;
  double sw = 0, sx = 0, sy = 0;
  for (const FitPoint& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) {
      return invalid_argument(what, "a point is not finite ({}, {})", p.x, p.y);
    }
    if (weighting == Weighting::kRelative && p.y <= 0) {
      return invalid_argument(what, "a time must be > 0 for a relative fit, got {} us at {} bytes", p.y, p.x);
    }
    const double w = weighting == Weighting::kRelative ? 1.0 / (p.y * p.y) : 1.0;
    weights.push_back(w);
    sw += w;
    sx += w * p.x;
    sy += w * p.y;
  }
  const double mx = sx / sw, my = sy / sw;
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const FitPoint& p = points[i];
    sxx += weights[i] * (p.x - mx) * (p.x - mx);
    sxy += weights[i] * (p.x - mx) * (p.y - my);
    syy += weights[i] * (p.y - my) * (p.y - my);
  }
  if (sxx <= 0) return invalid_argument(what, "every point has the same size {}; no line fits", mx);
  LineFit line;
  line.slope = sxy / sxx;
  line.intercept = my - line.slope * mx;
  double ss_res = 0;
  line.x_min = std::numeric_limits<double>::infinity();
  line.x_max = -line.x_min;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const FitPoint& p = points[i];
    const double r = p.y - line.predict(p.x);
    line.residuals.push_back(r);
    ss_res += weights[i] * r * r;
    line.x_min = std::min(line.x_min, p.x);
    line.x_max = std::max(line.x_max, p.x);
  }
  line.r2 = syy > 0 ? 1.0 - ss_res / syy : 1.0;
  return line;
}

Result<GatedFit> fit_gated(std::vector<FitPoint> points, std::string_view what) {
  std::sort(points.begin(), points.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  EPS_ASSIGN_OR_RETURN(LineFit one, fit_line(points, what, Weighting::kRelative));
  GatedFit fit;
  if (accepted(one)) {
    fit.withheld = false;
    fit.ranges.push_back(std::move(one));
    return fit;
  }
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t split = kMinFitPoints; split + kMinFitPoints <= points.size(); ++split) {
    const std::span<const FitPoint> all(points);
    const Result<LineFit> low = fit_line(all.first(split), what, Weighting::kRelative);
    const Result<LineFit> high = fit_line(all.subspan(split), what, Weighting::kRelative);
    if (!low.ok() || !high.ok() || !accepted(*low) || !accepted(*high)) continue;
    const double sse = relative_squared_residuals(*low, all.first(split)) +
                       relative_squared_residuals(*high, all.subspan(split));
    if (sse < best) {
      best = sse;
      fit.ranges = {*low, *high};
    }
  }
  if (!fit.ranges.empty()) {
    fit.withheld = false;
    return fit;
  }
  fit.reason = fmt::format(
      "{}: one line over {} sizes has R^2 (relative) {:.3f} and slope {:.3g} us/B (needs R^2 >= {} and slope "
      "> 0), and "
      "no split into two size ranges of at least {} sizes fits",
      what, points.size(), one.r2, one.slope, kMinR2, kMinFitPoints);
  return fit;
}

double GatedFit::predict(double x) const {
  for (const LineFit& line : ranges) {
    if (x <= line.x_max) return line.predict(x);
  }
  return ranges.back().predict(x);
}

double line_gbps(const LineFit& line) { return line.slope > 0 ? 1e-3 / line.slope : 0.0; }

}  // namespace eps::model
