// Micro-benchmarks of docs/numerics.md 1 numerics: element conversions and FP8 per-token quantization on one
// core. Bytes processed count the input (fp32, bf16 or fp8 elements; bf16 rows for quantization).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reference/numerics/bf16.hpp"
#include "reference/numerics/fp8.hpp"
#include "reference/numerics/quant.hpp"

namespace eps {
namespace {

constexpr std::size_t kElements = 1 << 16;
constexpr std::size_t kChunk = 128;

// Uniform values in [-range, range), fixed seed so every run converts the same data.
std::vector<float> uniform_floats(std::size_t n, float range) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> u(-range, range);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

void BM_Fp32ToBf16(benchmark::State& state) {
  const std::vector<float> in = uniform_floats(kElements, 1000.0f);
  std::vector<std::uint16_t> out(kElements);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kElements; ++i) out[i] = fp32_to_bf16_bits(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements * sizeof(float));
}
BENCHMARK(BM_Fp32ToBf16);

void BM_Bf16ToFp32(benchmark::State& state) {
  const std::vector<float> values = uniform_floats(kElements, 1000.0f);
  std::vector<std::uint16_t> in(kElements);
  for (std::size_t i = 0; i < kElements; ++i) in[i] = fp32_to_bf16_bits(values[i]);
  std::vector<float> out(kElements);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kElements; ++i) out[i] = bf16_bits_to_fp32(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements * sizeof(std::uint16_t));
}
BENCHMARK(BM_Bf16ToFp32);

void BM_Fp32ToFp8(benchmark::State& state) {
  // [-600, 600) covers saturation, normals and (near zero) subnormals.
  const std::vector<float> in = uniform_floats(kElements, 600.0f);
  std::vector<std::uint8_t> out(kElements);
  for (auto _ : state) {
    // Through a local chunk: byte stores to `out` could alias `in` as far as the compiler knows, which
    // would keep the loop scalar (quant_group.hpp does the same).
    for (std::size_t i = 0; i < kElements; i += kChunk) {
      std::uint8_t chunk[kChunk];
      for (std::size_t j = 0; j < kChunk; ++j) chunk[j] = fp32_to_fp8_bits(in[i + j]);
      std::memcpy(out.data() + i, chunk, kChunk);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements * sizeof(float));
}
BENCHMARK(BM_Fp32ToFp8);

void BM_Fp8ToFp32(benchmark::State& state) {
  std::vector<std::uint8_t> in(kElements);
  for (std::size_t i = 0; i < kElements; ++i) in[i] = static_cast<std::uint8_t>(i * 37);
  std::vector<float> out(kElements);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kElements; i += kChunk) {
      float chunk[kChunk];  // see BM_Fp32ToFp8
      for (std::size_t j = 0; j < kChunk; ++j) chunk[j] = fp8_bits_to_fp32(in[i + j]);
      std::memcpy(out.data() + i, chunk, sizeof chunk);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements * sizeof(std::uint8_t));
}
BENCHMARK(BM_Fp8ToFp32);

// docs/numerics.md 1.2 on a DeepSeek-V3-sized batch: 128 tokens of H = 7168 (56 groups each); arg 0 selects
// kAmax, arg 1 kRoundScale.
void BM_Fp8QuantizePerToken(benchmark::State& state) {
  constexpr int kTokens = 128, kHidden = 7168;
  const auto mode = state.range(0) == 0 ? Fp8ScaleMode::kAmax : Fp8ScaleMode::kRoundScale;
  const std::vector<float> values = uniform_floats(std::size_t{kTokens} * kHidden, 4.0f);
  std::vector<bf16> x(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) x[i] = bf16::from_float(values[i]);
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> scales(x.size() / kFp8GroupSize);
  for (auto _ : state) {
    const Status status = quantize_fp8_per_token(x, kTokens, kHidden, mode, codes, scales);
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(scales.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * x.size());
  state.SetBytesProcessed(state.iterations() * x.size() * sizeof(bf16));
}
BENCHMARK(BM_Fp8QuantizePerToken)->ArgName("round_scale")->Arg(0)->Arg(1);

}  // namespace
}  // namespace eps
