// Expert kernel throughput at the ec-dlm-owt expert shape (docs/presets.md 11: H 512, F 384), 256 rows per
// call, flops = 2 n (2 F H + H F). The yardstick is OpenBLAS cblas_sgemm on the same three GEMMs with fp32
// copies of the weights, forced to one thread (openblas_set_num_threads(1)) so every benchmark here
// uses one core. All report the counter `flops` as a rate, so kernel / OpenBLAS is a division.
#include <cblas.h>

#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "reference/data/fill.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/expert/swiglu.hpp"
#include "reference/expert/tree_kernel.hpp"

namespace eps {
namespace {

constexpr ExpertShape kShape{512, 384};
constexpr int kRows = 256;
constexpr double kFlops = 2.0 * kRows * (2.0 * kShape.ffn * kShape.hidden + 1.0 * kShape.hidden * kShape.ffn);

struct Fixture {
  ExpertWeights weights;
  std::vector<bf16> x;
  Fixture() : weights(value_or_throw(generate_expert_weights(1, 0, ExpertRole::kRouted, 0, kShape))) {
    x.resize(static_cast<std::size_t>(kRows) * kShape.hidden);
    throw_if_error(data::fill_payload(1, 0, 0, kRows, kShape.hidden, x));
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void set_flops(benchmark::State& state) {
  state.counters["flops"] = benchmark::Counter(kFlops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * kRows);
}

void BM_ExpertScalar(benchmark::State& state) {
  const Fixture& f = fixture();
  std::vector<bf16> y(f.x.size());
  for (auto _ : state) {
    throw_if_error(swiglu_scalar(f.weights, f.x, ExpertOutputs{y}));
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state);
}
BENCHMARK(BM_ExpertScalar)->Unit(benchmark::kMillisecond);

void BM_ExpertVectorized(benchmark::State& state) {
  const auto path = static_cast<SimdPath>(state.range(0));
  if (!simd_path_available(path)) {
    state.SkipWithError("SIMD path not available on this CPU/build");
    return;
  }
  state.SetLabel(std::string(simd_path_name(path)));
  const Fixture& f = fixture();
  const TreeExpert tree = value_or_throw(TreeExpert::create(f.weights));
  std::vector<bf16> y(f.x.size());
  for (auto _ : state) {
    throw_if_error(tree.forward(f.x, ExpertOutputs{y}, path));
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state);
}
BENCHMARK(BM_ExpertVectorized)
    ->Arg(static_cast<int>(SimdPath::kPortable))
    ->Arg(static_cast<int>(SimdPath::kAvx2))
    ->Arg(static_cast<int>(SimdPath::kAvx512))
    ->Unit(benchmark::kMillisecond);

std::vector<float> to_fp32(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i].to_float();
  return out;
}

// A = X W1^T, B = X W3^T ([n, F]), then Y = Hm W2^T ([n, H]) with Hm = silu(A) * B in fp32: the same
// three GEMMs as the expert (the elementwise step is included, as in the expert kernels).
void BM_ExpertOpenBlasYardstick(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Fixture& f = fixture();
  const int n = kRows, h = kShape.hidden, ffn = kShape.ffn;
  const std::vector<float> x = to_fp32(f.x), w1 = to_fp32(f.weights.w1), w3 = to_fp32(f.weights.w3),
                           w2 = to_fp32(f.weights.w2);
  std::vector<float> a(static_cast<std::size_t>(n) * ffn), b(a.size()), y(static_cast<std::size_t>(n) * h);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, ffn, h, 1.0f, x.data(), h, w1.data(), h, 0.0f,
                a.data(), ffn);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, ffn, h, 1.0f, x.data(), h, w3.data(), h, 0.0f,
                b.data(), ffn);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = silu_fp32(a[i]) * b[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, h, ffn, 1.0f, a.data(), ffn, w2.data(), ffn, 0.0f,
                y.data(), h);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel("openblas 1 thread");
  set_flops(state);
}
BENCHMARK(BM_ExpertOpenBlasYardstick)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps
