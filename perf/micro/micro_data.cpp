// Micro-benchmarks of the docs/numerics.md 2 generators: Philox throughput, payload/logit fills, workload
// routing.
#include <benchmark/benchmark.h>

#include <vector>

#include "reference/data/fill.hpp"
#include "reference/data/workload.hpp"

namespace eps::data {
namespace {

void BM_Philox4x32_10(benchmark::State& state) {
  PhiloxCounter counter{{0, 1, 2, 3}};
  const PhiloxKey key = seed_key(0x1234);
  for (auto _ : state) {
    const PhiloxBlock block = philox4x32_10(counter, key);
    benchmark::DoNotOptimize(block);
    ++counter.v[0];
  }
  state.SetItemsProcessed(state.iterations());  // blocks of 4 x 32 bits
}
BENCHMARK(BM_Philox4x32_10);

// x [T, H] bf16 for one rank; args: T, H.
void BM_FillPayload(benchmark::State& state) {
  const auto tokens = static_cast<std::uint64_t>(state.range(0));
  const auto hidden = static_cast<std::uint32_t>(state.range(1));
  std::vector<bf16> x(tokens * hidden);
  for (auto _ : state) {
    benchmark::DoNotOptimize(fill_payload(7, 1, 0, tokens, hidden, x).ok());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(x.size()));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(bf16)));
}
BENCHMARK(BM_FillPayload)->Args({128, 7168})->Args({512, 512})->Unit(benchmark::kMicrosecond);

// logits [T, E] fp32; args: T, E.
void BM_FillRouterLogits(benchmark::State& state) {
  const auto tokens = static_cast<std::uint64_t>(state.range(0));
  const auto experts = static_cast<std::uint32_t>(state.range(1));
  std::vector<float> logits(tokens * experts);
  for (auto _ : state) {
    benchmark::DoNotOptimize(fill_router_logits(7, 0, 1, 0, tokens, experts, logits).ok());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(logits.size()));
}
BENCHMARK(BM_FillRouterLogits)->Args({4096, 256})->Unit(benchmark::kMicrosecond);

// Routing of 4096 tokens, E = 256, K = 8 (ht-deepseek-v3 shape, docs/presets.md 11) for one pattern.
void BM_GenerateRouting(benchmark::State& state, const char* pattern) {
  const WorkloadSpec spec = value_or_throw(parse_workload(pattern));
  const RoutingShape shape{8, 256, 8};
  RoutingRequest request;
  request.seed = 7;
  request.rank = 1;
  request.step = 3;
  request.num_tokens = 4096;
  for (auto _ : state) {
    Result<Routing> routing = generate_routing(spec, shape, request);
    benchmark::DoNotOptimize(routing.ok());
  }
  state.SetItemsProcessed(state.iterations() * request.num_tokens);  // tokens
}
BENCHMARK_CAPTURE(BM_GenerateRouting, uniform, "uniform")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRouting, zipf, "zipf:1.2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRouting, spread, "spread")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRouting, spatial, "spatial:16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRouting, drift, "drift:50")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps::data
