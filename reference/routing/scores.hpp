// Router score functions in fp32 with the operation order fixed by docs/numerics.md 1.4 / docs/routing.md 3.1
// (the reference library is built with -ffp-contract=off, so every operation rounds once). exp is the suite's
// portable_exp (docs/numerics.md 1.5), never libm.
//
// sigmoid(x) = 1 / (1 + exp(-x)); sigmoid(-inf) = 0. Inputs must not be NaN or +inf.
// softmax_row: m = max_e x_e; d_e = exp(x_e - m); s = Σ_e d_e in ascending e starting from 0.0f;
//   out_e = d_e / s. A row whose values are all -inf has no defined softmax: every output is 0.0f (the
//   routers document what that means for them). -inf entries give exactly 0.0f.
#pragma once

#include <limits>
#include <span>

#include "reference/numerics/transcendental.hpp"

namespace eps::routing {

inline float sigmoid(float x) { return 1.0f / (1.0f + portable_exp(-x)); }

inline void softmax_row(std::span<const float> x, std::span<float> out) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = v > m ? v : m;
  if (m == -std::numeric_limits<float>::infinity()) {
    for (float& o : out) o = 0.0f;
    return;
  }
  float sum = 0.0f;
  for (std::size_t e = 0; e < x.size(); ++e) {
    out[e] = portable_exp(x[e] - m);
    sum += out[e];
  }
  for (std::size_t e = 0; e < x.size(); ++e) out[e] = out[e] / sum;
}

}  // namespace eps::routing
