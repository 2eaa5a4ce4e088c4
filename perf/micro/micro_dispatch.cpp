// Micro-benchmarks of the dispatch/combine expectations (docs/dispatch.md 5): what one rank pays to compute
// its own expected outputs inside a conformance run. Routing: uniform, K 8 distinct experts of E 256 per
// token, R 8 ranks, from a fixed mt19937 seed.
//   BM_DispatchPlanMake: validate + place the routing of all ranks (ht-deepseek-v3: 4096 tokens/rank).
//     Items = tokens of all ranks.
//   BM_RankMajorIndex / BM_ExpertMajorIndex: rank 0's HT index (no payload), ht-deepseek-v3 shape.
//     Items = tokens of all ranks scanned.
//   BM_LlCheck: check_ll_dispatch of rank 0's canonical layout, ll-deepseek-v3 shape (128 tokens/rank,
//     H 7168 fp8): fetches and compares every received row. Bytes = payload bytes compared.
//   BM_LlWeightedCombine: rank 0's ll-weighted combine, 128 tokens, H 7168. Items = tokens.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "reference/dispatch/combine.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"

namespace eps::dispatch {
namespace {

constexpr int kRanks = 8, kExperts = 256, kTopK = 8, kHidden = 7168;

DispatchPlan uniform_plan(int tokens, PayloadType dtype) {
  std::mt19937 rng(2024);
  std::vector<int> experts(kExperts);
  std::vector<RankRouting> routing(kRanks);
  for (RankRouting& r : routing) {
    r.num_tokens = tokens;
    for (int t = 0; t < tokens; ++t) {
      std::iota(experts.begin(), experts.end(), 0);
      for (int k = 0; k < kTopK; ++k) {  // partial Fisher-Yates: K distinct experts
        std::swap(experts[k], experts[std::uniform_int_distribution<int>(k, kExperts - 1)(rng)]);
        r.topk_idx.push_back(experts[k]);
        r.topk_weights.push_back(0.125f);
      }
    }
  }
  const DispatchConfig config{.num_ranks = kRanks,
                              .num_experts = kExperts,
                              .top_k = kTopK,
                              .hidden = kHidden,
                              .max_tokens_per_rank = tokens,
                              .dtype = dtype};
  return value_or_throw(DispatchPlan::make(config, std::move(routing)));
}

// Rows of a constant byte pattern per (rank, token); the cost is the row copy, like a memcpy-fast generator.
class PatternRows final : public RowSource {
 public:
  void fill_row(int rank, int token, std::span<std::byte> row) const override {
    std::memset(row.data(), (rank * 31 + token) & 0x7f, row.size());
  }
  void fill_scales(int rank, int token, std::span<float> scales) const override {
    std::fill(scales.begin(), scales.end(), static_cast<float>(rank + token));
  }
};

void BM_DispatchPlanMake(benchmark::State& state) {
  const DispatchPlan reference = uniform_plan(4096, PayloadType::kFp8);
  std::vector<RankRouting> routing;
  for (int r = 0; r < kRanks; ++r) {
    RankRouting rr{4096, {}, {}};
    for (int t = 0; t < 4096; ++t) {
      for (int k = 0; k < kTopK; ++k) {
        rr.topk_idx.push_back(reference.topk_idx(r, t)[k]);
        rr.topk_weights.push_back(reference.topk_weights(r, t)[k]);
      }
    }
    routing.push_back(std::move(rr));
  }
  for (auto _ : state) {
    auto plan = DispatchPlan::make(reference.config(), routing);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * kRanks * 4096);
}
BENCHMARK(BM_DispatchPlanMake)->Unit(benchmark::kMillisecond);

void BM_RankMajorIndex(benchmark::State& state) {
  const DispatchPlan plan = uniform_plan(4096, PayloadType::kFp8);
  for (auto _ : state) {
    auto index = rank_major_index(plan, 0);
    benchmark::DoNotOptimize(index);
  }
  state.SetItemsProcessed(state.iterations() * kRanks * 4096);
}
BENCHMARK(BM_RankMajorIndex)->Unit(benchmark::kMillisecond);

void BM_ExpertMajorIndex(benchmark::State& state) {
  const DispatchPlan plan = uniform_plan(4096, PayloadType::kFp8);
  for (auto _ : state) {
    auto index = expert_major_index(plan, 0);
    benchmark::DoNotOptimize(index);
  }
  state.SetItemsProcessed(state.iterations() * kRanks * 4096);
}
BENCHMARK(BM_ExpertMajorIndex)->Unit(benchmark::kMillisecond);

void BM_LlCheck(benchmark::State& state) {
  const DispatchPlan plan = uniform_plan(128, PayloadType::kFp8);
  const PatternRows rows;
  const LlExpected expected = value_or_throw(expected_ll(plan, 0, rows));
  const LlView view{expected.packed_recv_x, expected.packed_recv_x_scales, expected.index.packed_recv_count,
                    expected.index.src_info, expected.index.layout_range};
  std::int64_t received = 0;
  for (int c : expected.index.packed_recv_count) received += c;
  for (auto _ : state) {
    auto report = check_ll_dispatch(plan, 0, rows, view, LlOrder::kUnordered);
    if (!report.ok() || !report->ok()) state.SkipWithError("checker rejected the canonical layout");
    benchmark::DoNotOptimize(report);
  }
  state.SetBytesProcessed(state.iterations() * received * kHidden);
}
BENCHMARK(BM_LlCheck)->Unit(benchmark::kMillisecond);

void BM_LlWeightedCombine(benchmark::State& state) {
  const DispatchPlan plan = uniform_plan(128, PayloadType::kFp8);
  const SlotOutputFn y = [](int, int t, int k, std::span<bf16> row) {
    std::fill(row.begin(), row.end(), bf16::from_float(static_cast<float>(t + k)));
  };
  for (auto _ : state) {
    auto out = expected_ll_combine(plan, 0, y);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * 128);
}
BENCHMARK(BM_LlWeightedCombine)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps::dispatch
