#include "reference/expert/tree_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "reference/expert/tree_gemm.hpp"

namespace eps {

namespace {

// Rows per pass: big enough to reuse each weight block many times, small enough that the fp32 copies
// of the rows and their intermediates stay in L2.
constexpr int kChunkRows = 32;

int round_up(int v, int m) { return (v + m - 1) / m * m; }

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// Zero-filled, 64-byte aligned floats (the AVX paths rely on the alignment of every padded row).
std::unique_ptr<float, FreeDeleter> aligned_zeros(std::size_t count) {
  const std::size_t bytes = std::max<std::size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::unique_ptr<float, FreeDeleter>(p);
}

void copy_padded(const bf16* src, int rows, int cols, float* dst, int len) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c)
      dst[static_cast<std::size_t>(r) * len + c] = src[static_cast<std::size_t>(r) * cols + c].to_float();
  }
}

using GemmFn = void (*)(const float*, int, const float*, int, int, float*, int);

GemmFn gemm_for(SimdPath path) {
  switch (path) {
    case SimdPath::kAvx2:
      return tree_detail::tree_gemm_avx2;
    case SimdPath::kAvx512:
      return tree_detail::tree_gemm_avx512;
    case SimdPath::kPortable:
      break;
  }
  return tree_detail::tree_gemm_portable;
}

}  // namespace

namespace tree_detail {

// The definition of tree_kernel.hpp written out lane by lane.
void tree_gemm_portable(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo) {
  for (int i = 0; i < rows; ++i) {
    const float* xi = x + static_cast<std::size_t>(i) * len;
    for (int j = 0; j < cols; ++j) {
      const float* wj = w + static_cast<std::size_t>(j) * len;
      float acc[kTreeLanes] = {};
      for (int k = 0; k < len; k += kTreeLanes) {
        for (int l = 0; l < kTreeLanes; ++l) acc[l] = std::fma(xi[k + l], wj[k + l], acc[l]);
      }
      for (int s = kTreeLanes / 2; s >= 1; s /= 2) {
        for (int l = 0; l < s; ++l) acc[l] = acc[l] + acc[l + s];
      }
      out[static_cast<std::size_t>(i) * ldo + j] = acc[0];
    }
  }
}

#if !EPS_EXPERT_SIMD
// Never called: simd_path_available() reports these paths as missing in a portable-only build.
void tree_gemm_avx2(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo) {
  tree_gemm_portable(x, rows, w, cols, len, out, ldo);
}
void tree_gemm_avx512(const float* x, int rows, const float* w, int cols, int len, float* out, int ldo) {
  tree_gemm_portable(x, rows, w, cols, len, out, ldo);
}
#endif

}  // namespace tree_detail

std::string_view simd_path_name(SimdPath path) {
  switch (path) {
    case SimdPath::kAvx2:
      return "avx2";
    case SimdPath::kAvx512:
      return "avx512";
    case SimdPath::kPortable:
      break;
  }
  return "portable";
}

bool simd_path_available(SimdPath path) {
  switch (path) {
    case SimdPath::kPortable:
      return true;
#if EPS_EXPERT_SIMD
    case SimdPath::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SimdPath::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#else
    case SimdPath::kAvx2:
    case SimdPath::kAvx512:
      return false;
#endif
  }
  return false;
}

std::vector<SimdPath> available_simd_paths() {
  std::vector<SimdPath> paths;
  for (SimdPath p : {SimdPath::kPortable, SimdPath::kAvx2, SimdPath::kAvx512}) {
    if (simd_path_available(p)) paths.push_back(p);
  }
  return paths;
}

SimdPath best_simd_path() { return available_simd_paths().back(); }

Result<TreeExpert> TreeExpert::create(const ExpertWeights& weights) {
  EPS_RETURN_IF_ERROR(validate_expert_weights(weights));
  TreeExpert e;
  e.shape_ = weights.shape;
  e.hidden_len_ = round_up(e.shape_.hidden, kTreeLanes);
  e.ffn_len_ = round_up(e.shape_.ffn, kTreeLanes);
  e.hidden_rows_ = round_up(e.shape_.hidden, 4);
  e.ffn_rows_ = round_up(e.shape_.ffn, 4);
  const std::size_t gate_size = static_cast<std::size_t>(e.ffn_rows_) * e.hidden_len_;
  const std::size_t down_size = static_cast<std::size_t>(e.hidden_rows_) * e.ffn_len_;
  auto block = aligned_zeros(2 * gate_size + down_size);
  float* w1 = block.get();
  float* w3 = w1 + gate_size;
  float* w2 = w3 + gate_size;
  copy_padded(weights.w1.data(), e.shape_.ffn, e.shape_.hidden, w1, e.hidden_len_);
  copy_padded(weights.w3.data(), e.shape_.ffn, e.shape_.hidden, w3, e.hidden_len_);
  copy_padded(weights.w2.data(), e.shape_.hidden, e.shape_.ffn, w2, e.ffn_len_);
  e.w1_ = w1;
  e.w3_ = w3;
  e.w2_ = w2;
  e.weights_ = std::shared_ptr<const float>(block.release(), FreeDeleter());
  return e;
}

Status TreeExpert::forward(std::span<const bf16> x, const ExpertOutputs& out) const {
  return forward(x, out, best_simd_path());
}

Status TreeExpert::forward(std::span<const bf16> x, const ExpertOutputs& out, SimdPath path) const {
  if (!simd_path_available(path)) {
    return invalid_argument("simd_path", "'{}' is not available on this build or CPU", simd_path_name(path));
  }
  std::size_t n = 0;
  EPS_RETURN_IF_ERROR(validate_expert_io(shape_, x, out, &n));
  for (std::size_t r = 0; r < n; r += kChunkRows) {
    const int rows = static_cast<int>(std::min<std::size_t>(kChunkRows, n - r));
    forward_chunk(x.data() + r * shape_.hidden, rows, out, r, path);
  }
  return Status();
}

void TreeExpert::forward_chunk(const bf16* x, int rows, const ExpertOutputs& out, std::size_t first_row,
                               SimdPath path) const {
  const GemmFn gemm = gemm_for(path);
  const int hidden = shape_.hidden;
  const int ffn = shape_.ffn;
  const int padded_rows = round_up(rows, 4);  // zero rows: their outputs are computed and dropped
  auto xs = aligned_zeros(static_cast<std::size_t>(padded_rows) * hidden_len_);
  auto a = aligned_zeros(static_cast<std::size_t>(padded_rows) * ffn_rows_);
  auto b = aligned_zeros(static_cast<std::size_t>(padded_rows) * ffn_rows_);
  auto hs = aligned_zeros(static_cast<std::size_t>(padded_rows) * ffn_len_);
  auto ys = aligned_zeros(static_cast<std::size_t>(padded_rows) * hidden_rows_);
  copy_padded(x, rows, hidden, xs.get(), hidden_len_);
  gemm(xs.get(), padded_rows, w1_, ffn_rows_, hidden_len_, a.get(), ffn_rows_);
  gemm(xs.get(), padded_rows, w3_, ffn_rows_, hidden_len_, b.get(), ffn_rows_);
  for (int r = 0; r < rows; ++r) {
    const std::size_t row = first_row + r;
    for (int j = 0; j < ffn; ++j) {
      const float av = a.get()[static_cast<std::size_t>(r) * ffn_rows_ + j];
      const float bv = b.get()[static_cast<std::size_t>(r) * ffn_rows_ + j];
      const bf16 h = swiglu_gate(av, bv);
      hs.get()[static_cast<std::size_t>(r) * ffn_len_ + j] = h.to_float();
      if (!out.a_fp32.empty()) out.a_fp32[row * ffn + j] = av;
      if (!out.b_fp32.empty()) out.b_fp32[row * ffn + j] = bv;
      if (!out.h.empty()) out.h[row * ffn + j] = h;
    }
  }
  gemm(hs.get(), padded_rows, w2_, hidden_rows_, ffn_len_, ys.get(), hidden_rows_);
  for (int r = 0; r < rows; ++r) {
    const std::size_t row = first_row + r;
    for (int i = 0; i < hidden; ++i) {
      const float y = ys.get()[static_cast<std::size_t>(r) * hidden_rows_ + i];
      out.y[row * hidden + i] = bf16::from_float(y);
      if (!out.y_fp32.empty()) out.y_fp32[row * hidden + i] = y;
    }
  }
}

}  // namespace eps
