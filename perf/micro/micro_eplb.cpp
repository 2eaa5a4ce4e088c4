// Micro-benchmark of the deepseek EPLB policy (docs/eplb.md 8.2) at DeepSeek-V3 scale: 58 MoE layers x 256
// experts, 288 physical slots, 8 groups, 4 nodes, 32 ranks (hierarchical path), seeded random loads.
// One iteration = one full plan (all layers, including the docs/eplb.md 8.1 invariant check).
// BM_PlannerDeepseekV3 sends the same problem to a planner (impls/layer/planner, the code of `epsuite
// planner`, here on a thread over loopback) and waits for the placement: one iteration = one authenticated
// round trip (encode, HMAC, TCP, decode, plan, reply). Its `planner_ms` counter is the policy's time inside
// the planner.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "impls/layer/planner/planner.hpp"
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

void BM_PlannerDeepseekV3(benchmark::State& state) {
  const auto fail = [&](const Status& status) { state.SkipWithError(status.message().c_str()); };
  Result<planner::PlannerKey> key = planner::PlannerKey::random();
  if (!key.ok()) return fail(key.status());
  planner::PlannerOptions options;
  options.on_log = [](const std::string&) {};
  Result<std::unique_ptr<planner::PlannerServer>> server = planner::PlannerServer::start(options, *key);
  if (!server.ok()) return fail(server.status());
  Result<std::unique_ptr<planner::PlannerClient>> client =
      planner::PlannerClient::connect("127.0.0.1", (*server)->port(), *key, 10.0);
  if (!client.ok()) return fail(client.status());
  planner::PlanRequest request{0, "deepseek", 0, deepseek_v3_problem()};
  double planner_us = 0;
  for (auto _ : state) {
    ++request.request;
    if (Status sent = (*client)->send_plan(request); !sent.ok()) return fail(sent);
    Result<planner::PlannerClient::Reply> reply = (*client)->receive(Deadline(10.0));
    if (!reply.ok()) return fail(reply.status());
    if (!reply->placement || !reply->placement->placement)
      return fail(invalid_argument("reply", "no placement"));
    planner_us += reply->placement->planner_us;
  }
  state.counters["planner_ms"] =
      benchmark::Counter(planner_us / 1000.0 / static_cast<double>(state.iterations()));
  (*server)->request_stop();
  (*server)->wait();
}
BENCHMARK(BM_PlannerDeepseekV3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace eps
