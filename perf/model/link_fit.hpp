// Fitted straight lines with a quality gate (docs/model.md 16.2): the alpha-beta link models of `epsuite
// model` and the per-operation cost lines it predicts with.
//
// `fit_line` is weighted least squares of y = intercept + slope * x over the points, with the coefficient of
// determination R^2 = 1 - SS_res / SS_tot (both weighted, SS_tot around the weighted mean of y) and every
// point's residual (measured - fitted, in µs). Weighting kAbsolute gives every point weight 1 (ordinary least
// squares); kRelative gives weight 1 / y^2, so the fit and its R^2 judge relative errors: message sizes span
// six decades, and with equal weights the largest sizes alone decide R^2 (a line 10x off at 8 bytes still
// scores 0.999). Errors (kInvalidArgument, naming `what`): fewer than kMinFitPoints points, all x equal, a
// non-finite value, or y <= 0 under kRelative. When every y is equal, SS_tot is 0 and R^2 is defined as 1
// (the flat line goes through every point), which the gate then treats by its slope rule below.
//
// `fit_gated` applies the gate of docs/model.md 16.2 to a series (x ascending after sorting):
// (every line under kRelative):
//   1. one line over every point; accepted when R^2 >= kMinR2 and slope > 0;
//   2. otherwise two lines over two contiguous size ranges (the split that minimizes the summed squared
//   relative
//      residuals among the splits that leave each range kMinFitPoints points and both lines accepted);
//   3. otherwise the fit is withheld: `withheld` is true, `ranges` is empty and `reason` says why (the single
//      line's R^2 and slope, and that no split fits). A withheld fit is never reported as a bandwidth.
// slope > 0 is required because 1 / slope is the bandwidth; a line whose time does not grow with bytes has
// no bandwidth to report.
//
// A `GatedFit` predicts with the range whose [x_min, x_max] holds x, the nearest range outside them
// (extrapolation past the measured sizes follows the last range's line).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::model {

inline constexpr double kMinR2 = 0.9;  // docs/model.md 16.2
inline constexpr int kMinFitPoints = 3;

struct FitPoint {
  double x = 0;  // bytes
  double y = 0;  // microseconds
};

struct LineFit {
  double intercept = 0;  // µs (alpha)
  double slope = 0;      // µs per byte (1 / beta)
  double r2 = 0;
  double x_min = 0;
  double x_max = 0;
  std::vector<double> residuals;  // measured - fitted, per point in ascending x
  double predict(double x) const { return intercept + slope * x; }
};

enum class Weighting { kAbsolute, kRelative };

Result<LineFit> fit_line(std::span<const FitPoint> points, std::string_view what,
                         Weighting weighting = Weighting::kAbsolute);

struct GatedFit {
  bool withheld = true;
  std::string reason;              // why it was withheld; empty when accepted
  std::vector<LineFit> ranges;     // 1 or 2 accepted lines in ascending x; empty when withheld
  double predict(double x) const;  // only when !withheld
};

// `what` names the series in errors and reasons ("shm put-bw").
Result<GatedFit> fit_gated(std::vector<FitPoint> points, std::string_view what);

// 10^9 bytes per second of a line's slope (µs per byte); 0 for slope <= 0.
double line_gbps(const LineFit& line);

}  // namespace eps::model
