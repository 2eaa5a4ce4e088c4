#include "reference/numerics/quant.hpp"

#include <cstddef>

// The batch loops are cloned per x86 ISA level and picked at load time (GCC ifunc): the EPS_HD group
// body vectorizes in every clone (flatten inlines it), and AVX2/AVX-512 process 2-4x more lanes than the
// SSE2 baseline. Only the instruction selection differs; every operation is the same IEEE operation, so the
// clones are bit-identical (quant_test checks the batch against the body compiled for the baseline).
// ThreadSanitizer builds (ci/sanitize --tsan) take the baseline: GCC instruments the ifunc resolver, which
// the dynamic loader runs before the TSan runtime exists, and every program crashed at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(__SANITIZE_THREAD__)
#define EPS_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define EPS_ISA_CLONES
#endif

namespace eps {
namespace {

EPS_ISA_CLONES void quantize_groups(const bf16* x, std::size_t groups, Fp8ScaleMode mode, std::uint8_t* codes,
                                    float* scales) {
  for (std::size_t g = 0; g < groups; ++g) {
    scales[g] = fp8_quantize_group(x + g * kFp8GroupSize, codes + g * kFp8GroupSize, mode);
  }
}

EPS_ISA_CLONES void dequantize_groups(const std::uint8_t* codes, const float* scales, std::size_t groups,
                                      float* out) {
  for (std::size_t g = 0; g < groups; ++g) {
    fp8_dequantize_group(codes + g * kFp8GroupSize, scales[g], out + g * kFp8GroupSize);
  }
}

Status check_size(std::string_view field, std::size_t got, std::size_t expected, std::string_view what) {
  if (got == expected) return Status();
  return invalid_argument(field, "must hold {} = {} values, got {}", what, expected, got);
}

}  // namespace

Status check_fp8_shape(int tokens, int hidden) {
  if (tokens < 0) return invalid_argument("tokens", "must be >= 0, got {}", tokens);
  if (hidden <= 0 || hidden % kFp8GroupSize != 0) {
    return invalid_argument("hidden", "must be a multiple of {} for fp8, got {}", kFp8GroupSize, hidden);
  }
  return Status();
}

Status quantize_fp8_per_token(std::span<const bf16> x, int tokens, int hidden, Fp8ScaleMode mode,
                              std::span<std::uint8_t> codes, std::span<float> scales) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(tokens, hidden));
  const std::size_t values = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  const std::size_t groups = values / kFp8GroupSize;
  EPS_RETURN_IF_ERROR(check_size("x", x.size(), values, "tokens * hidden"));
  EPS_RETURN_IF_ERROR(check_size("codes", codes.size(), values, "tokens * hidden"));
  EPS_RETURN_IF_ERROR(check_size("scales", scales.size(), groups, "tokens * hidden / 128"));
  // Rows are contiguous, so group g of the flattened batch is group g % (H/128) of row g / (H/128).
  quantize_groups(x.data(), groups, mode, codes.data(), scales.data());
  return Status();
}

Result<Fp8Batch> quantize_fp8_per_token(std::span<const bf16> x, int tokens, int hidden, Fp8ScaleMode mode) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(tokens, hidden));
  const std::size_t values = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  Fp8Batch batch{tokens, hidden, std::vector<std::uint8_t>(values),
                 std::vector<float>(values / kFp8GroupSize)};
  EPS_RETURN_IF_ERROR(quantize_fp8_per_token(x, tokens, hidden, mode, batch.codes, batch.scales));
  return batch;
}

Status dequantize_fp8_per_token(std::span<const std::uint8_t> codes, std::span<const float> scales,
                                int tokens, int hidden, std::span<float> out) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(tokens, hidden));
  const std::size_t values = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  const std::size_t groups = values / kFp8GroupSize;
  EPS_RETURN_IF_ERROR(check_size("codes", codes.size(), values, "tokens * hidden"));
  EPS_RETURN_IF_ERROR(check_size("scales", scales.size(), groups, "tokens * hidden / 128"));
  EPS_RETURN_IF_ERROR(check_size("out", out.size(), values, "tokens * hidden"));
  dequantize_groups(codes.data(), scales.data(), groups, out.data());
  return Status();
}

Result<std::vector<float>> dequantize_fp8_per_token(const Fp8Batch& batch) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(batch.tokens, batch.hidden));
  std::vector<float> out(static_cast<std::size_t>(batch.tokens) * static_cast<std::size_t>(batch.hidden));
  EPS_RETURN_IF_ERROR(dequantize_fp8_per_token(batch.codes, batch.scales, batch.tokens, batch.hidden, out));
  return out;
}

}  // namespace eps
