#include "reference/expert/swiglu.hpp"

namespace eps {

namespace {

Status check_matrix(std::string_view field, std::size_t got, std::size_t rows, std::size_t cols) {
  if (got == rows * cols) return Status();
  return invalid_argument(field, "expected {} x {} = {} values, got {}", rows, cols, rows * cols, got);
}

Status check_output(std::string_view field, std::size_t got, std::size_t rows, std::size_t cols) {
  if (got == 0 || got == rows * cols) return Status();
  return invalid_argument(field, "expected {} rows x {} = {} values (or none), got {}", rows, cols,
                          rows * cols, got);
}

// docs/numerics.md 1.4: ascending index order from 0.0f; -ffp-contract=off keeps the multiply and the add
// apart.
float ascending_dot(const float* x, const bf16* w, int len) {
  float sum = 0.0f;
  for (int i = 0; i < len; ++i) sum = sum + x[i] * w[i].to_float();
  return sum;
}

}  // namespace

Status validate_expert_weights(const ExpertWeights& weights) {
  const ExpertShape& s = weights.shape;
  if (s.hidden < 1 || s.hidden > kMaxExpertDim)
    return out_of_range("expert.hidden", 1, kMaxExpertDim, s.hidden);
  if (s.ffn < 1 || s.ffn > kMaxExpertDim) return out_of_range("expert.ffn", 1, kMaxExpertDim, s.ffn);
  const auto h = static_cast<std::size_t>(s.hidden);
  const auto f = static_cast<std::size_t>(s.ffn);
  EPS_RETURN_IF_ERROR(check_matrix("expert.w1", weights.w1.size(), f, h));
  EPS_RETURN_IF_ERROR(check_matrix("expert.w3", weights.w3.size(), f, h));
  return check_matrix("expert.w2", weights.w2.size(), h, f);
}

Status validate_expert_io(const ExpertShape& shape, std::span<const bf16> x, const ExpertOutputs& out,
                          std::size_t* rows) {
  const auto h = static_cast<std::size_t>(shape.hidden);
  const auto f = static_cast<std::size_t>(shape.ffn);
  if (x.size() % h != 0)
    return invalid_argument("x", "expected a multiple of H = {} values, got {}", h, x.size());
  const std::size_t n = x.size() / h;
  if (out.y.size() != n * h) {
    return invalid_argument("y", "expected {} rows x {} = {} values, got {}", n, h, n * h, out.y.size());
  }
  EPS_RETURN_IF_ERROR(check_output("y_fp32", out.y_fp32.size(), n, h));
  EPS_RETURN_IF_ERROR(check_output("a_fp32", out.a_fp32.size(), n, f));
  EPS_RETURN_IF_ERROR(check_output("b_fp32", out.b_fp32.size(), n, f));
  EPS_RETURN_IF_ERROR(check_output("h", out.h.size(), n, f));
  *rows = n;
  return Status();
}

Status swiglu_scalar(const ExpertWeights& weights, std::span<const bf16> x, const ExpertOutputs& out) {
  EPS_RETURN_IF_ERROR(validate_expert_weights(weights));
  std::size_t n = 0;
  EPS_RETURN_IF_ERROR(validate_expert_io(weights.shape, x, out, &n));
  const int hidden = weights.shape.hidden;
  const int ffn = weights.shape.ffn;
  std::vector<float> xf(static_cast<std::size_t>(hidden));
  std::vector<float> hf(static_cast<std::size_t>(ffn));
  for (std::size_t r = 0; r < n; ++r) {
    for (int i = 0; i < hidden; ++i) xf[i] = x[r * hidden + i].to_float();
    for (int j = 0; j < ffn; ++j) {
      const std::size_t wrow = static_cast<std::size_t>(j) * hidden;
      const float a = ascending_dot(xf.data(), weights.w1.data() + wrow, hidden);
      const float b = ascending_dot(xf.data(), weights.w3.data() + wrow, hidden);
      const bf16 h = swiglu_gate(a, b);
      hf[j] = h.to_float();
      const std::size_t at = r * ffn + j;
      if (!out.a_fp32.empty()) out.a_fp32[at] = a;
      if (!out.b_fp32.empty()) out.b_fp32[at] = b;
      if (!out.h.empty()) out.h[at] = h;
    }
    for (int i = 0; i < hidden; ++i) {
      const float y = ascending_dot(hf.data(), weights.w2.data() + static_cast<std::size_t>(i) * ffn, ffn);
      const std::size_t at = r * hidden + i;
      out.y[at] = bf16::from_float(y);
      if (!out.y_fp32.empty()) out.y_fp32[at] = y;
    }
  }
  return Status();
}

}  // namespace eps
