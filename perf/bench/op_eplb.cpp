// `epsuite bench eplb --preset P --workload drift|hot|trace:FILE|... [--policy A,B,...] [--steps N]
// [--lb-interval N] [--slots P] [--replica-rule modulo|local-first] [--planner HOST:PORT] [--transport T]`:
// the layer stack under EPLB at run time (docs/eplb.md 8.4-8.7, impls/layer/eplb_runtime.hpp), one series per
// selected transport and policy, each from the same initial static placement (flags and workload:
// perf/bench/bench_flags.hpp EplbPlan). --mode ht runs ht-expert-major, ll the LL layout (both combine with
// the ll-weighted tree; ht-rank-major depends on the placement and is refused by the runtime); a transport
// that declares no such layout is skipped with the reason (direct and proxy: use --mode ll). `greedy` places
// no replicas, so it needs P = E: within `all` it is skipped with the reason.
//
// Points: the load windows. A series runs --steps steps (a multiple of --lb-interval) of one EplbRuntime; a
// point is one window of --lb-interval steps, each step one timed iteration (no warm-up: the steps are
// successive states of the run, none repeated). A step's time is this rank's wall time of the layer stack
// (EplbStepRecord::stack_us), the driver's maximum over ranks; the boundary after it (loads, planner, weight
// moves, switch) is reported apart. With -c every step's output is compared bit for bit with the
// single-process reference of runtime.spec_at(step) (layer::compare_with_reference;
// perf/bench/eplb_window.hpp computes each once for all series, the steps of a window spread over the ranks,
// untimed).
//
// Per window: β predicted (docs/eplb.md 8.5: the plan in force at the window's end under the loads it was
// planned from; the initial static placement under window 0's loads) and realized (that plan under the
// window's loads, WindowRecord::realized), both aggregates Σ_l mean / Σ_l max of even-split rank loads; β of
// the rows each rank computed (the replica rule's real split); the rebalances that switched at one of the
// window's step boundaries: moved experts and bytes (same rank / same node / cross node), the planner's run
// time and the stall of the switch (RebalanceRecord::switch_us, max over ranks).
//
// Case: op "eplb", mode "<layout>/<tree>", sizes {tokens, ranks, hidden, ffn, experts, slots, top_k, shared,
// layers, lb_interval, steps, window}, identity + policy, workload, replica_rule, planner, preset, seed,
// device, staging; times_us the window's step times; bytes = wire bytes received per step by the slowest rank
// (mean over the window); the fields of docs/results.md 9.6 (results/op_fields.hpp EplbWindowFields).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "impls/layer/eplb_runtime.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/bench_flags.hpp"
#include "perf/bench/eplb_window.hpp"
#include "perf/bench/layer_setup.hpp"
#include "perf/bench/oversubscription.hpp"
#include "results/op_fields.hpp"

namespace eps::bench {
namespace {

using layer::LayerSpec;

MoveClasses moves(const eplb::MoveCounts& m) {
  return {static_cast<double>(m.same_rank), static_cast<double>(m.same_node),
          static_cast<double>(m.cross_node)};
}
MoveClasses moves(const eplb::MoveBytes& m) { return {m.same_rank, m.same_node, m.cross_node}; }

// Σ_l mean_r / Σ_l max_r of the (row, expert) pairs each rank computed (1 without work).
double rows_balancedness(const std::vector<std::vector<std::int64_t>>& rank_rows) {
  double mean_sum = 0, max_sum = 0;
  for (const std::vector<std::int64_t>& rows : rank_rows) {
    if (rows.empty()) continue;
    mean_sum += std::accumulate(rows.begin(), rows.end(), 0.0) / static_cast<double>(rows.size());
    max_sum += static_cast<double>(*std::max_element(rows.begin(), rows.end()));
  }
  return max_sum > 0 ? mean_sum / max_sum : 1.0;
}

class WindowPoint final : public BenchPoint {
 public:
  WindowPoint(const EplbPlan& plan, StepReferences& references, layer::EplbRuntime& runtime,
              std::string policy, int window)
      : plan_(plan),
        runtime_(runtime),
        policy_(std::move(policy)),
        window_(window),
        measurement_(runtime, references, plan.config.lb_interval, plan.timeout) {}

  std::vector<Measurement*> measurements() override { return {&measurement_}; }

  PointReport report(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const std::vector<StepSummary>& steps = measurement_.steps();
    const EplbWindowFields f = fields();
    const double boundary = *std::max_element(f.boundary_us.begin(), f.boundary_us.end());
    const double mean =
        std::accumulate(m.times_us.begin(), m.times_us.end(), 0.0) / static_cast<double>(m.times_us.size());
    const MoveClasses& moved = f.moved_experts;
    PointReport report;
    report.cells = {std::int64_t{window_},
                    fmt::format("{}-{}", f.first_step, f.last_step),
                    static_cast<std::int64_t>(f.plan),
                    f.predicted,
                    f.realized,
                    f.balancedness_rows,
                    mean,
                    *std::max_element(m.times_us.begin(), m.times_us.end()),
                    boundary,
                    f.switches,
                    fmt::format("{}/{}/{}", moved.same_rank, moved.same_node, moved.cross_node),
                    (f.moved_bytes.same_rank + f.moved_bytes.same_node + f.moved_bytes.cross_node) / 1e6,
                    f.stall_us,
                    f.planner_us};
    const std::vector<std::int64_t>& wire = measurement_.wire_received();
    CaseParts c;
    c.sizes = {{"window", window_}};
    c.algo_bytes = wire.empty() ? 0.0
                                : static_cast<double>(wire[static_cast<std::size_t>(m.slowest_rank)]) /
                                      static_cast<double>(steps.size());
    c.physical_bytes = c.algo_bytes;
    c.extra = to_json(f);
    report.cases.push_back(std::move(c));
    return report;
  }

 private:
  // The window's record, the predicted β of its plan and its switches.
  EplbWindowFields fields() const {
    const std::vector<layer::WindowRecord>& windows = runtime_.windows();
    const layer::WindowRecord& w = windows.at(static_cast<std::size_t>(window_));
    // Plan 0, the initial static placement, was planned from no loads: its prediction is window 0's β.
    eplb::Balancedness predicted = windows.front().realized;
    for (const layer::RebalanceRecord& r : runtime_.rebalances()) {
      if (r.request == w.plan && w.plan != 0) predicted = r.predicted;
    }
    EplbWindowFields f;
    f.policy = policy_;
    f.window = window_;
    f.first_step = measurement_.steps().front().step;
    f.last_step = measurement_.steps().back().step;
    f.plan = w.plan;
    f.predicted = predicted.aggregate;
    f.realized = w.realized.aggregate;
    f.predicted_per_layer = predicted.per_layer;
    f.realized_per_layer = w.realized.per_layer;
    f.balancedness_rows = rows_balancedness(w.rank_rows);
    f.switches = static_cast<std::int64_t>(measurement_.switches().size());
    f.expert_load = w.loads;
    for (const StepSummary& s : measurement_.steps()) f.boundary_us.push_back(s.boundary_us);
    for (const Switch& s : measurement_.switches()) {
      const layer::RebalanceRecord& r = s.record;
      const RebalanceFields one{r.request,           r.requested_after_step, r.adopted_after_step,
                                r.staged_after_step, r.switch_step,          r.planner_us,
                                s.stall_us,          r.predicted.aggregate,  moves(r.moved),
                                moves(r.moved_bytes)};
      f.rebalances.push_back(one);
      for (MoveClasses* sum : {&f.moved_experts, &f.moved_bytes}) {
        const MoveClasses& add = sum == &f.moved_experts ? one.moved_experts : one.moved_bytes;
        sum->same_rank += add.same_rank;
        sum->same_node += add.same_node;
        sum->cross_node += add.cross_node;
      }
      f.planner_us += r.planner_us;
      f.stall_us += s.stall_us;
    }
    return f;
  }

  const EplbPlan& plan_;
  layer::EplbRuntime& runtime_;
  std::string policy_;
  int window_;
  WindowMeasurement measurement_;
};

class EplbSeries final : public BenchSeries {
 public:
  EplbSeries(std::unique_ptr<transport::Transport> transport, std::unique_ptr<layer::EplbRuntime> runtime,
             std::shared_ptr<const EplbPlan> plan, std::shared_ptr<StepReferences> references,
             std::string policy)
      : transport_(std::move(transport)),
        runtime_(std::move(runtime)),
        plan_(std::move(plan)),
        references_(std::move(references)),
        policy_(std::move(policy)) {}

  SeriesInfo info() const override {
    const LayerSpec& s = plan_->base;
    const layer::EplbConfig& c = plan_->config;
    const std::string_view rule = s.replica_rule == eplb::ReplicaRule::kModulo ? "modulo" : "local-first";
    SeriesInfo info =
        stack_series(*transport_, *plan_->device, s, plan_->preset, plan_->router, "none", "eplb");
    info.echo.emplace_back(
        "eplb",
        fmt::format("policy {}, {} steps in windows of {} ({} windows), P {} slots for E {} experts, replica "
                    "rule {}, {} rank(s) per node, planner {}",
                    policy_, plan_->steps, c.lb_interval, plan_->steps / c.lb_interval, s.slots(),
                    s.num_experts, rule, s.ranks_per_node,
                    c.planner_address.empty() ? std::string("thread on rank 0") : c.planner_address));
    info.echo.emplace_back(
        "timer",
        "step: wall time of the layer stack per rank, max over ranks (no warm-up: step 0 is cold); "
        "boundary: the step boundary after it (loads, planner, weight moves, switch), max over "
        "ranks");
    info.echo.emplace_back(
        "beta",
        "docs/eplb.md 8.5 mean / max rank load: pred = the plan in force at the window's end under "
        "the loads it was planned from (the initial static placement: under window 0's loads), real "
        "= under the window's loads (even split), rows = of the (row, expert) pairs each rank "
        "computed");
    info.table = eplb_table();
    info.base.sizes.insert(info.base.sizes.end(), {{"tokens", s.rank_tokens.front()},
                                                   {"slots", s.slots()},
                                                   {"lb_interval", c.lb_interval},
                                                   {"steps", plan_->steps}});
    info.base.identity["policy"] = policy_;
    info.base.identity["workload"] = plan_->workload;
    info.base.identity["replica_rule"] = std::string(rule);
    info.base.identity["planner"] = c.planner_address.empty() ? "thread" : "process";
    return info;
  }

  int num_points() const override { return plan_->steps / plan_->config.lb_interval; }

  Result<std::unique_ptr<BenchPoint>> make_point(int index) override {
    return std::unique_ptr<BenchPoint>(
        std::make_unique<WindowPoint>(*plan_, *references_, *runtime_, policy_, index));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<layer::EplbRuntime> runtime_;  // uses transport_: destroyed first
  std::shared_ptr<const EplbPlan> plan_;
  std::shared_ptr<StepReferences> references_;
  std::string policy_;
};

// The series of `policy` over transport `name`; kUnavailable for greedy with replicas and for a transport
// without the layout of --mode.
Result<std::unique_ptr<BenchSeries>> make_series(const std::shared_ptr<const EplbPlan>& plan,
                                                 const std::shared_ptr<StepReferences>& references,
                                                 const std::string& name, const std::string& policy) {
  const LayerSpec& spec = plan->base;
  if (policy == "greedy" && spec.slots() != spec.num_experts) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("greedy places no replicas: it needs --slots {} (= E), P is {}",
                              spec.num_experts, spec.slots()));
  }
  EPS_ASSIGN_OR_RETURN(
      std::unique_ptr<transport::Transport> t,
      transport::make_transport(
          name, layer::layer_transport_config(spec, MPI_COMM_WORLD, plan->device.get(), plan->timeout),
          plan->fabric));
  if (!t->capabilities().supports(spec.layout)) {
    const bool ll = spec.layout == transport::Layout::kLl;
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} declares no {} dispatch, which --mode {} runs here (try --mode {})", name,
                              transport::layout_name(spec.layout), ll ? "ll" : "ht", ll ? "ht" : "ll"));
  }
  layer::EplbConfig config = plan->config;
  config.policy = policy;
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<layer::EplbRuntime> runtime,
                       layer::EplbRuntime::create(spec, config, *t, *plan->device, mpi::rank()));
  return std::unique_ptr<BenchSeries>(
      std::make_unique<EplbSeries>(std::move(t), std::move(runtime), plan, references, policy));
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<const EplbPlan> plan, make_eplb_plan(context, config));
  const std::string& which = context.params.string("transport");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names, transport::select_transports(which));
  auto references = std::make_shared<StepReferences>();
  std::vector<SeriesPlan> series;
  for (const std::string& name : names) {
    for (const std::string& policy : plan->policies) {
      // A transport or policy the user named; greedy within `all` is skipped, not failed, under --strict.
      const bool named =
          (which != "all" || !plan->all_policies) && !(policy == "greedy" && plan->all_policies);
      series.push_back(
          {fmt::format("{} over {}", policy, name),
           [plan, references, name, policy] { return make_series(plan, references, name, policy); }, named,
           helper_threads_per_rank(name, plan->fabric.proxy_threads)});
    }
  }
  return series;
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_eplb(eps::bench::BenchOpRegistry& registry) {
  registry.add(
      {.name = "eplb",
       .summary = "the layer stack under EPLB at run time: one series per policy, one point per load window "
                  "(docs/eplb.md 8.4-8.7)",
       .params = eps::bench::eplb_params,
       .plan = eps::bench::plan,
       .fixed_iterations = true});
}
