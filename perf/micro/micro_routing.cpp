// Micro-benchmarks of the routing references (docs/routing.md 3). Items processed = logits consumed (T·E), so
// the reported items/s is logits per second on one core.
//   BM_TokenChoiceSoftmaxTop8: softmax, K 8, E 256, 4096 tokens (ht-deepseek-v3 tokens per rank).
//   BM_TokenChoiceDeepseekV3: sigmoid + bias, 8 groups, topk_groups 4, K 8, renorm, scaling 2.5.
//   BM_ExpertChoiceDlm/<schedule>: the ec-dlm-owt shape, 8 sequences x 512 tokens, E 512, k 20 static
//     (arg 0) or linear_reverse 8..32 (arg 1), selection + gates.
// Logits follow docs/numerics.md 2.2 (uniform in [-4, 4) on a 2^-10 grid, so ties occur) from a fixed mt19937
// seed.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "reference/routing/expert_choice.hpp"
#include "reference/routing/token_choice.hpp"

namespace eps {
namespace {

std::vector<float> grid_logits(std::int64_t tokens, std::int64_t experts) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> level(-4096, 4095);
  std::vector<float> logits(static_cast<std::size_t>(tokens * experts));
  for (float& v : logits) v = static_cast<float>(level(rng)) / 1024.0f;
  return logits;
}

routing::RoutingInput input_of(const std::vector<float>& logits, std::int64_t t, std::int64_t e,
                               std::int64_t s, const std::vector<float>& mask_ratio) {
  routing::RoutingInput in;
  in.logits = logits;
  in.num_tokens = t;
  in.num_experts = e;
  in.seq_len = s;
  in.mask_ratio = mask_ratio;
  return in;
}

void run_token_choice(benchmark::State& state, const routing::TokenChoiceConfig& config) {
  constexpr std::int64_t kTokens = 4096, kExperts = 256;
  const std::vector<float> logits = grid_logits(kTokens, kExperts);
  const routing::RoutingInput in = input_of(logits, kTokens, kExperts, kTokens, {});
  for (auto _ : state) {
    auto routed = routing::route_token_choice(config, in);
    if (!routed.ok()) state.SkipWithError(routed.status().message().c_str());
    benchmark::DoNotOptimize(routed);
  }
  state.SetItemsProcessed(state.iterations() * kTokens * kExperts);
}

void BM_TokenChoiceSoftmaxTop8(benchmark::State& state) {
  routing::TokenChoiceConfig config;
  config.k = 8;
  run_token_choice(state, config);
}
BENCHMARK(BM_TokenChoiceSoftmaxTop8)->Unit(benchmark::kMillisecond);

void BM_TokenChoiceDeepseekV3(benchmark::State& state) {
  routing::TokenChoiceConfig config;
  config.score = routing::ScoreFunction::kSigmoid;
  config.k = 8;
  config.renorm = true;
  config.groups = 8;
  config.topk_groups = 4;
  config.scaling = 2.5f;
  config.bias.resize(256);
  for (std::size_t e = 0; e < config.bias.size(); ++e) config.bias[e] = static_cast<float>(e % 7) / 64.0f;
  run_token_choice(state, config);
}
BENCHMARK(BM_TokenChoiceDeepseekV3)->Unit(benchmark::kMillisecond);

void BM_ExpertChoiceDlm(benchmark::State& state) {
  constexpr std::int64_t kSeqLen = 512, kSamples = 8, kExperts = 512;
  constexpr std::int64_t kTokens = kSeqLen * kSamples;
  const std::vector<float> logits = grid_logits(kTokens, kExperts);
  routing::ExpertChoiceConfig config;
  config.k_schedule.k = 20;
  std::vector<float> mask_ratio;
  if (state.range(0) == 1) {
    config.k_schedule.schedule.kind = routing::ScheduleKind::kLinearReverse;
    config.k_schedule.k_min = 8;
    config.k_schedule.k_max = 32;
    for (std::int64_t b = 0; b < kSamples; ++b) mask_ratio.push_back(static_cast<float>(b) / (kSamples - 1));
  }
  const routing::RoutingInput in = input_of(logits, kTokens, kExperts, kSeqLen, mask_ratio);
  for (auto _ : state) {
    auto routed = routing::route_expert_choice(config, in);
    if (!routed.ok()) state.SkipWithError(routed.status().message().c_str());
    benchmark::DoNotOptimize(routed);
  }
  state.SetItemsProcessed(state.iterations() * kTokens * kExperts);
  state.SetLabel(state.range(0) == 1 ? "linear_reverse 8..32" : "static k 20");
}
BENCHMARK(BM_ExpertChoiceDlm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps
