// FP8 per-token quantization of a token batch (docs/numerics.md 1.2, DeepEP convention) and its
// dequantization: the host reference of the fp8 payloads that dispatch carries (docs/dispatch.md 5: x fp8 [T,
// H] + scales [T, H/128] fp32).
//
// Row t, group g covers channels [128 g, 128 g + 128) of x[t]; its codes land at the same positions of
// `codes` and its scale at scales[t * (H / 128) + g]. The arithmetic of one group, including how NaN
// and infinities behave, is fp8_quantize_group / fp8_dequantize_group in quant_group.hpp; the CUDA and
// HIP kernels run the same functions, so their results are bit-identical to these.
//
// Errors (invalid_argument, nothing written): tokens < 0 ("tokens: must be >= 0, got -1"); hidden not a
// positive multiple of 128 ("hidden: must be a multiple of 128 for fp8, got 100"); a span whose size is
// not the shape's ("codes: must hold tokens * hidden = 256 values, got 255").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps {

// A quantized batch: codes [tokens, hidden] (fp8 e4m3fn bit patterns), scales [tokens, hidden / 128].
struct Fp8Batch {
  int tokens = 0;
  int hidden = 0;
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

// The shape check shared by every fp8 entry point (host and device): the errors listed above.
Status check_fp8_shape(int tokens, int hidden);

// Quantizes x [tokens, hidden] into caller-provided codes [tokens, hidden] and scales
// [tokens, hidden / 128].
Status quantize_fp8_per_token(std::span<const bf16> x, int tokens, int hidden, Fp8ScaleMode mode,
                              std::span<std::uint8_t> codes, std::span<float> scales);

// The same, allocating the result.
Result<Fp8Batch> quantize_fp8_per_token(std::span<const bf16> x, int tokens, int hidden, Fp8ScaleMode mode);

// x'[t, c] = fp32(codes[t, c]) * scales[t, c / 128] into caller-provided out [tokens, hidden].
Status dequantize_fp8_per_token(std::span<const std::uint8_t> codes, std::span<const float> scales,
                                int tokens, int hidden, std::span<float> out);

// The same for a whole Fp8Batch, allocating the result.
Result<std::vector<float>> dequantize_fp8_per_token(const Fp8Batch& batch);

}  // namespace eps
