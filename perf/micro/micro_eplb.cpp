// Micro-benchmark of the deepseek EPLB policy (docs/eplb.md 8.2) at DeepSeek-V3 scale: 58 MoE layers x 256
// experts, 288 physical slots, 8 groups, 4 nodes, 32 ranks (hierarchical path), seeded random loads.
// One iteration = one full plan (all layers, including the docs/eplb.md 8.1 invariant check).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "reference/eplb/policy.hpp"

namespace eps {
namespace {

eplb::EplbProblem deepseek_v3_problem() {
  eplb::EplbProblem p;
  std::mt19937 rng(2025);
  std::uniform_int_distribution<int> tokens(0, 9999);
  p.weight.assign(58, std::vector<double>(256));
  for (auto& row : p.weight) {
    for (double& v : row) v = tokens(rng);
  }
  p.num_replicas = 288;
  p.num_groups = 8;
  p.num_nodes = 4;
  p.num_ranks = 32;
  return p;
}

void BM_EplbDeepseekV3(benchmark::State& state) {
  const eplb::EplbProblem problem = deepseek_v3_problem();
  const eplb::EplbPolicy& policy = *eplb::find_eplb_policy("deepseek").value();
  for (auto _ : state) {
    auto plan = policy.plan(problem);
    if (!plan.ok()) state.SkipWithError(plan.status().message().c_str());
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * 58);  // layers planned
}
BENCHMARK(BM_EplbDeepseekV3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps
