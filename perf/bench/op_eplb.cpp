// `epsuite bench eplb --preset P --workload drift|hot|trace:FILE|... [--policy A,B,...] [--steps N]
// [--lb-interval N] [--slots P] [--replica-rule modulo|local-first] [--planner HOST:PORT] [--transport T]`:
// the layer stack under EPLB at run time (docs/eplb.md 8.4-8.7, impls/layer/eplb_runtime.hpp), one series per
// selected transport and policy, each from the same initial static placement.
//
// Workload (every token's experts, docs/numerics.md 2.3): `drift` is drift:STEPS with STEPS = 4 x --steps
// (the popularity bump moves a quarter of the way around the experts over the run: fast enough that a static
// placement falls behind, slow enough that a plan made from one window still fits the next), `hot` is
// hot:0,0.5 (expert 0 in half the tokens), anything else a workload text as given (hot:E,P, zipf:S,
// trace:FILE, drift:N with N >= --steps, ...). Each rank holds the preset's tokens per rank (or the one value
// of --tokens); the preset gives the stack (layers, H, F, E, shared experts), K (a trace: its own) and the
// dispatch dtype; --mode ht runs ht-expert-major, ll the LL layout (both combine with the ll-weighted tree;
// ht-rank-major depends on the placement and is refused by the runtime); a transport that declares no such
// layout is skipped with the reason (direct and proxy: use
// --mode ll). P = --slots physical slots (0: E + R, one redundant slot per rank); `greedy` places no
// replicas, so it needs P = E: named, it is refused otherwise; within `all` it is skipped with the reason.
//
// Points: the load windows. A series runs --steps steps (a multiple of --lb-interval) of one EplbRuntime; a
// point is one window of --lb-interval steps, each step one timed iteration (no warm-up: the steps are
// successive states of the run, none repeated). A step's time is this rank's wall time of the layer stack
// (EplbStepRecord::stack_us), the driver's maximum over ranks; the boundary after it (loads, planner, weight
// moves, switch) is reported apart. With -c every step's output is compared bit for bit with the
// single-process reference of runtime.spec_at(step) (layer::compare_with_reference); the reference does not
// depend on the placement (docs/eplb.md 8.4), so each step's is computed once for all series, the steps of a
// window spread over the ranks (untimed).
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
// (mean over the window); extra: policy, window, first_step, last_step, plan, balancedness {predicted,
// realized}, balancedness_per_layer {predicted, realized}, balancedness_rows, boundary_us [step], switches,
// moved_experts and moved_bytes {same_rank, same_node, cross_node}, planner_us, stall_us (sums over the
// window's switches), rebalances [{request, requested_after_step, adopted_after_step, staged_after_step,
// switch_step, planner_us, stall_us, predicted, moved_experts, moved_bytes}], expert_load [layer][E].
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "impls/fabric/fabric_selection.hpp"
#include "impls/layer/eplb_runtime.hpp"
#include "impls/layer/planner/planner.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/driver.hpp"
#include "perf/bench/layer_setup.hpp"
#include "perf/bench/oversubscription.hpp"
#include "perf/bench/presets.hpp"
#include "perf/bench/table.hpp"
#include "perf/bench/transport_ops.hpp"
#include "reference/common/version.hpp"
#include "reference/data/values.hpp"
#include "reference/eplb/policy.hpp"

namespace eps::bench {
namespace {

using layer::LayerSpec;

constexpr int kMaxSteps = static_cast<int>(data::kMaxStep) + 1;
constexpr const char* kAllPolicies = "all";
constexpr const char* kHotWorkload = "hot:0,0.5";
// References kept for reuse by later series; beyond this the oldest steps are dropped (and recomputed).
constexpr double kReferenceBudgetBytes = 1024.0 * 1024 * 1024;

// The single-process reference output [T, H] of each step's stack, shared by every series: the placement
// never changes the output (docs/eplb.md 8.4), so a step's reference is the same under every policy.
class StepReferences {
 public:
  // Collective: computes the missing ones of steps [first, first + count) (spec_at(step) gives each step's
  // spec), each on one rank (the i-th missing step on rank i mod R), and broadcasts them.
  Status ensure(std::int64_t first, int count, const std::function<LayerSpec(std::int64_t)>& spec_at,
                double timeout);
  const std::vector<bf16>& at(std::int64_t step) const { return outputs_.at(step); }

 private:
  std::map<std::int64_t, std::vector<bf16>> outputs_;
};

Status StepReferences::ensure(std::int64_t first, int count,
                              const std::function<LayerSpec(std::int64_t)>& spec_at, double timeout) {
  std::vector<std::int64_t> missing;
  for (std::int64_t step = first; step < first + count; ++step) {
    if (outputs_.count(step) == 0) missing.push_back(step);
  }
  if (missing.empty()) return Status();
  const LayerSpec spec = spec_at(first);
  const std::size_t values =
      static_cast<std::size_t>(spec.num_tokens()) * static_cast<std::size_t>(spec.hidden);
  const auto keep = static_cast<std::size_t>(std::max(
      kReferenceBudgetBytes / (static_cast<double>(values) * sizeof(bf16)), static_cast<double>(count)));
  // Drop the lowest steps outside this range while the range's would not fit.
  for (auto it = outputs_.begin(); it != outputs_.end() && outputs_.size() + missing.size() > keep;) {
    it = it->first >= first && it->first < first + count ? std::next(it) : outputs_.erase(it);
  }
  Status mine;
  for (std::size_t i = 0; i < missing.size() && mine.ok(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(mpi::size())) != mpi::rank()) continue;
    Result<std::vector<bf16>> out = layer::reference_stack_output(spec_at(missing[i]));
    if (!out.ok()) {
      mine = out.status();
    } else if (out->size() != values) {
      mine =
          Status(StatusCode::kEnvironment, fmt::format("the reference of step {} has {} values, expected {}",
                                                       missing[i], out->size(), values));
    } else {
      outputs_[missing[i]] = std::move(out).value();
    }
  }
  const Deadline deadline(timeout);
  int failed = mine.ok() ? 0 : 1;
  EPS_RETURN_IF_ERROR(
      mpi::allreduce_in_place(&failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, deadline, "the EPLB references"));
  if (!mine.ok()) return mine;
  if (failed)
    return Status(StatusCode::kEnvironment, "a reference stack failed on another rank (it says why)");
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const int owner = static_cast<int>(i % static_cast<std::size_t>(mpi::size()));
    std::vector<bf16>& out = outputs_[missing[i]];
    out.resize(values);
    MPI_Request request = MPI_REQUEST_NULL;
    EPS_MPI_CHECK(
        MPI_Ibcast(out.data(), static_cast<int>(values), MPI_UINT16_T, owner, MPI_COMM_WORLD, &request));
    EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline, [&] {
      return fmt::format("the reference of step {} from rank {} (rank {})", missing[i], owner, mpi::rank());
    }));
  }
  return Status();
}

struct EplbPlan {
  ResolvedPreset preset;
  LayerSpec base;  // rank_tokens, routing workload, slots, replica rule and ranks_per_node set; step 0
  std::vector<std::string> policies;
  bool all_policies = false;
  int steps = 0;
  std::string workload;  // the workload's canonical text
  std::string router;    // "workload drift:32"
  layer::EplbConfig config;
  double timeout = kDefaultTimeoutSeconds;
  fabric::FabricSelection fabric;
  std::shared_ptr<device::Device> device;
  std::shared_ptr<StepReferences> references = std::make_shared<StepReferences>();
};

// --policy: "all" or a comma-separated list of registered policies, each once.
Result<std::vector<std::string>> parse_policies(const std::string& text) {
  if (text == kAllPolicies) return eplb::eplb_policy_names();
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    if (!eplb::find_eplb_policy(name).ok()) {
      return invalid_argument("--policy", "unknown policy '{}'; registered: {} (or all)", name,
                              fmt::join(eplb::eplb_policy_names(), ", "));
    }
    if (std::find(out.begin(), out.end(), name) != out.end())
      return invalid_argument("--policy", "'{}' is named twice", name);
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

// The drift workload's trajectory is this many times the run's steps (see above).
constexpr int kDriftStretch = 4;

// --workload: drift -> drift:(kDriftStretch x STEPS), hot -> hot:0,0.5, else a docs/numerics.md 2.3 workload
// as given.
Result<data::WorkloadSpec> parse_eplb_workload(const Params& p, int steps, const data::RoutingShape& shape) {
  if (p.source("workload") == ParamSource::kDefault) {
    return invalid_argument("--workload",
                            "bench eplb needs one: drift (the popular experts move a quarter turn over "
                            "--steps), hot (expert 0 in "
                            "half the tokens), trace:FILE, or any docs/numerics.md 2.3 workload (hot:E,P, "
                            "zipf:S, ...)");
  }
  const std::string& text = p.string("workload");
  const std::string full = text == "drift" ? fmt::format("drift:{}", kDriftStretch * steps)
                           : text == "hot" ? kHotWorkload
                                           : text;
  Result<data::WorkloadSpec> spec = data::parse_workload(full);
  if (!spec.ok()) return invalid_argument("--workload", "{}", spec.status().message());
  if (spec->pattern == data::WorkloadPattern::kDrift && spec->steps < steps) {
    return invalid_argument(
        "--workload", "{} has fewer steps than --steps {} (use drift, which takes --steps)", full, steps);
  }
  data::RoutingShape checked = shape;
  if (spec->trace) checked.top_k = spec->trace->top_k;
  const Status valid = data::validate_workload(*spec, checked);
  if (!valid.ok()) return invalid_argument("--workload", "{}", valid.message());
  return spec;
}

Result<std::shared_ptr<EplbPlan>> make_plan(const BenchContext& context) {
  const Params& p = context.params;
  auto plan = std::make_shared<EplbPlan>();
  plan->timeout = p.number("timeout");
  for (std::string_view flag : {"iters", "warmup"}) {
    if (p.source(std::string(flag)) == ParamSource::kFlag) {
      return invalid_argument(
          fmt::format("--{}", flag),
          "bench eplb times every one of --steps steps once, in windows of --lb-interval; "
          "-n and -w do not apply");
    }
  }
  plan->fabric = fabric::fabric_selection_from(p);
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(plan->fabric));
  EPS_ASSIGN_OR_RETURN(mpi::NodeLayout nodes, mpi::node_layout(MPI_COMM_WORLD, Deadline(plan->timeout)));
  EPS_ASSIGN_OR_RETURN(plan->preset, resolve_preset_flags(p, nodes));
  const Preset& preset = *plan->preset.preset;
  const int ranks = mpi::size();
  plan->steps = static_cast<int>(p.integer("steps"));
  const int interval = static_cast<int>(p.integer("lb-interval"));
  if (plan->steps % interval != 0) {
    return invalid_argument("--steps",
                            "{} is not a multiple of --lb-interval {} (every point is a whole window)",
                            plan->steps, interval);
  }
  EPS_ASSIGN_OR_RETURN(plan->policies, parse_policies(p.string("policy")));
  plan->all_policies = p.string("policy") == kAllPolicies;

  LayerSpec& spec = plan->base;
  spec = preset_stack(plan->preset, static_cast<std::uint64_t>(p.integer("seed")), p.integer("layers"));
  std::string schedule;
  EPS_ASSIGN_OR_RETURN(spec.router, preset_router(plan->preset, "tc", "preset", schedule));
  spec.seq_len = 1;
  std::int64_t tokens = preset.tokens_per_rank;
  if (p.source("tokens") != ParamSource::kDefault) {
    if (plan->preset.tokens.values.size() != 1)
      return invalid_argument("--tokens", "bench eplb takes one token count per rank, got '{}'",
                              p.sweep("tokens").text);
    tokens = plan->preset.tokens.values.front();
  }
  if (tokens < 1) return invalid_argument("--tokens", "bench eplb needs at least one token per rank");
  spec.rank_tokens.assign(static_cast<std::size_t>(ranks), tokens);
  const data::RoutingShape shape{ranks, spec.num_experts, static_cast<int>(preset.topk)};
  EPS_ASSIGN_OR_RETURN(spec.routing_workload, parse_eplb_workload(p, plan->steps, shape));
  spec.routing_top_k = spec.routing_workload->trace ? spec.routing_workload->trace->top_k : shape.top_k;
  plan->workload = data::workload_name(*spec.routing_workload);
  plan->router = "workload " + plan->workload;
  spec.layout = p.string("mode") == "ll" ? transport::Layout::kLl : transport::Layout::kHtExpertMajor;
  const std::string& dtype = p.string("dtype");
  const std::string_view chosen = dtype == "preset" ? preset.dispatch_dtype : std::string_view(dtype);
  spec.dtype = chosen == "fp8" ? dispatch::PayloadType::kFp8 : dispatch::PayloadType::kBf16;

  const std::int64_t slots = p.integer("slots") > 0 ? p.integer("slots") : spec.num_experts + ranks;
  if (slots % ranks != 0 || slots < spec.num_experts) {
    return invalid_argument("--slots", "P must be a multiple of the {} ranks and at least E = {}, got {}",
                            ranks, spec.num_experts, slots);
  }
  spec.num_slots = static_cast<int>(slots);
  EPS_ASSIGN_OR_RETURN(spec.replica_rule, eplb::parse_replica_rule(p.string("replica-rule")));
  if (plan->preset.ranks_per_node == 0) {
    // Not yet (README): local-first's node and the move accounting of reference/eplb count uniform nodes.
    return invalid_argument("--op",
                            "bench eplb needs nodes of one size (its local-first rule counts uniform "
                            "nodes); the nodes of this run hold {} ranks",
                            plan->preset.layout.sizes_text());
  }
  spec.ranks_per_node = plan->preset.ranks_per_node;
  if (!plan->all_policies && spec.slots() != spec.num_experts &&
      std::find(plan->policies.begin(), plan->policies.end(), "greedy") != plan->policies.end()) {
    return invalid_argument(
        "--policy",
        "greedy places no replicas: it needs --slots {} (= E), got P = {} (--slots 0 is E + "
        "R)",
        spec.num_experts, spec.slots());
  }
  EPS_RETURN_IF_ERROR(layer::validate_layer_spec(spec));

  layer::EplbConfig& config = plan->config;
  config.lb_interval = interval;
  config.num_groups = static_cast<int>(preset.groups);
  config.timeout_seconds = plan->timeout;
  config.planner_address = p.string("planner");
  if (!config.planner_address.empty()) {
    EPS_RETURN_IF_ERROR(planner::parse_address("--planner", config.planner_address).status());
    if (std::getenv(std::string(planner::kKeyVariable).c_str()) == nullptr) {
      return invalid_argument("--planner", "talking to a planner process needs its key in {}",
                              planner::kKeyVariable);
    }
  }
  EPS_ASSIGN_OR_RETURN(plan->device, open_bench_device(p, plan->timeout));
  return plan;
}

// What one step left on this rank, and after settle() the maxima over ranks.
struct StepSummary {
  std::int64_t step = 0;
  double stack_us = 0;
  double boundary_us = 0;
  std::int64_t wire_received = 0;  // over the stack's layers
};

// A switch at one of the window's step boundaries, with its stall (max over ranks).
struct Switch {
  layer::RebalanceRecord record;
  double stall_us = 0;
};

class WindowMeasurement final : public Measurement {
 public:
  WindowMeasurement(layer::EplbRuntime& runtime, StepReferences& references, int steps, double timeout)
      : runtime_(runtime), references_(references), steps_(steps), timeout_(timeout) {}

  std::optional<Iterations> iterations() const override { return Iterations{0, steps_}; }

  Status prepare(int iteration, bool checking) override {
    if (!checking || iteration != 0) return Status();
    return references_.ensure(
        runtime_.next_step(), steps_, [this](std::int64_t step) { return runtime_.spec_at(step); }, timeout_);
  }
  Result<double> run(int) override {
    EPS_ASSIGN_OR_RETURN(const layer::EplbStepRecord record, runtime_.step());
    StepSummary s{record.step, record.stack_us, record.boundary_us, 0};
    for (const layer::StepRecord& l : record.layers) s.wire_received += l.wire.received;
    steps_done_.push_back(s);
    return record.stack_us;
  }
  Result<Mismatches> check(int) override {
    const std::int64_t step = steps_done_.back().step;
    EPS_ASSIGN_OR_RETURN(const std::vector<bf16> got, runtime_.output());
    const layer::OutputMismatches m =
        layer::compare_with_reference(runtime_.spec_at(step), mpi::rank(), got, references_.at(step));
    return Mismatches{m.count, m.count > 0 ? fmt::format("step {}: {}", step, m.first) : std::string()};
  }
  Status settle() override;

  const std::vector<StepSummary>& steps() const { return steps_done_; }
  const std::vector<Switch>& switches() const { return switches_; }
  const std::vector<std::int64_t>& wire_received() const { return wire_received_; }

 private:
  layer::EplbRuntime& runtime_;
  StepReferences& references_;
  int steps_;
  double timeout_;
  std::vector<StepSummary> steps_done_;
  std::vector<Switch> switches_;
  std::vector<std::int64_t> wire_received_;  // [rank], summed over the window
};

Status WindowMeasurement::settle() {
  const Deadline deadline(timeout_);
  // Boundary times, then the stalls of the switches at the window's boundaries (the same list on every rank).
  const std::int64_t first = steps_done_.front().step;
  const std::int64_t last = steps_done_.back().step;
  std::vector<double> times;
  for (const StepSummary& s : steps_done_) times.push_back(s.boundary_us);
  for (const layer::RebalanceRecord& r : runtime_.rebalances()) {
    if (r.switch_step - 1 < first || r.switch_step - 1 > last) continue;
    switches_.push_back({r, 0.0});
    times.push_back(r.switch_us);
  }
  EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(times.data(), static_cast<int>(times.size()), MPI_DOUBLE,
                                              MPI_MAX, MPI_COMM_WORLD, deadline, "EPLB boundary times"));
  for (std::size_t i = 0; i < steps_done_.size(); ++i) steps_done_[i].boundary_us = times[i];
  for (std::size_t i = 0; i < switches_.size(); ++i) switches_[i].stall_us = times[steps_done_.size() + i];
  std::int64_t wire = 0;
  for (const StepSummary& s : steps_done_) wire += s.wire_received;
  EPS_ASSIGN_OR_RETURN(wire_received_, gather_int64(wire, deadline, "wire bytes"));
  return Status();
}

Json move_json(double same_rank, double same_node, double cross_node) {
  return Json{{"same_rank", same_rank}, {"same_node", same_node}, {"cross_node", cross_node}};
}

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

// Columns: window, its steps, the plan in force at its end, β predicted / realized (even split) / of the
// computed rows, mean and max step time (µs), the largest boundary (µs), switches, moved experts (same rank /
// same node / cross node) and MB, the stall of the switches and the planner's run time (µs), #wrong.
std::string eplb_table_titles() {
  return fmt::format(
      "#{:>6} {:>11} {:>5} {:>6} {:>6} {:>6} {:>11} {:>11} {:>11} {:>6} {:>12} {:>8} {:>10} {:>10} {:>7}\n"
      "#{:>6} {:>11} {:>5} {:>6} {:>6} {:>6} {:>11} {:>11} {:>11} {:>6} {:>12} {:>8} {:>10} {:>10} {:>7}\n",
      "window", "steps", "plan", "beta", "beta", "beta", "step mean", "step max", "boundary", "switch",
      "moved", "moved", "stall", "planner", "#wrong", "", "", "", "pred", "real", "rows", "(us)", "(us)",
      "max (us)", "", "rank/node/x", "(MB)", "(us)", "(us)", "");
}

class WindowPoint final : public BenchPoint {
 public:
  WindowPoint(const EplbPlan& plan, std::string policy, transport::Transport& transport,
              layer::EplbRuntime& runtime, int window)
      : plan_(plan),
        policy_(std::move(policy)),
        transport_(transport),
        runtime_(runtime),
        window_(window),
        measurement_(runtime, *plan.references, plan.config.lb_interval, plan.timeout) {}

  std::vector<Measurement*> measurements() override { return {&measurement_}; }

  std::string row(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const Figures f = figures();
    const std::vector<StepSummary>& steps = measurement_.steps();
    double boundary = 0;
    for (const StepSummary& s : steps) boundary = std::max(boundary, s.boundary_us);
    const double mean =
        std::accumulate(m.times_us.begin(), m.times_us.end(), 0.0) / static_cast<double>(m.times_us.size());
    return fmt::format(
        " {:>6} {:>11} {:>5} {:>6.3f} {:>6.3f} {:>6.3f} {:>11.1f} {:>11.1f} {:>11.1f} {:>6} {:>12} {:>8.3f} "
        "{:>10.1f} {:>10.1f} {:>7}\n",
        window_, fmt::format("{}-{}", steps.front().step, steps.back().step), f.window.plan,
        f.predicted.aggregate, f.window.realized.aggregate, rows_balancedness(f.window.rank_rows), mean,
        *std::max_element(m.times_us.begin(), m.times_us.end()), boundary, measurement_.switches().size(),
        fmt::format("{}/{}/{}", f.moved.same_rank, f.moved.same_node, f.moved.cross_node),
        f.moved_bytes.total() / 1e6, f.stall_us, f.planner_us,
        m.check ? std::to_string(m.check->mismatches) : std::string("N/A"));
  }

  std::vector<CaseResult> cases(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const Figures f = figures();
    const LayerSpec& spec = plan_.base;
    const std::vector<StepSummary>& steps = measurement_.steps();
    CaseResult c = stack_case("eplb", transport_, *plan_.device, spec, plan_.preset);
    c.sizes.insert(c.sizes.end(), {{"slots", spec.slots()},
                                   {"lb_interval", plan_.config.lb_interval},
                                   {"steps", plan_.steps},
                                   {"window", window_}});
    c.identity["policy"] = policy_;
    c.identity["workload"] = plan_.workload;
    c.identity["replica_rule"] = spec.replica_rule == eplb::ReplicaRule::kModulo ? "modulo" : "local-first";
    c.identity["planner"] = plan_.config.planner_address.empty() ? "thread" : "process";
    c.times_us = m.times_us;
    const std::vector<std::int64_t>& wire = measurement_.wire_received();
    const double slowest_wire = wire.empty()
                                    ? 0.0
                                    : static_cast<double>(wire[static_cast<std::size_t>(m.slowest_rank)]) /
                                          static_cast<double>(steps.size());
    c.algo_bytes = slowest_wire;
    c.physical_bytes = slowest_wire;
    c.slowest_rank = m.slowest_rank;
    c.check = m.check;
    Json& x = c.extra;
    x["policy"] = policy_;
    x["window"] = window_;
    x["first_step"] = steps.front().step;
    x["last_step"] = steps.back().step;
    x["plan"] = f.window.plan;
    x["balancedness"] = Json{{"predicted", f.predicted.aggregate}, {"realized", f.window.realized.aggregate}};
    x["balancedness_per_layer"] =
        Json{{"predicted", f.predicted.per_layer}, {"realized", f.window.realized.per_layer}};
    x["balancedness_rows"] = rows_balancedness(f.window.rank_rows);
    std::vector<double> boundary;
    for (const StepSummary& s : steps) boundary.push_back(s.boundary_us);
    x["boundary_us"] = boundary;
    x["switches"] = measurement_.switches().size();
    x["moved_experts"] =
        move_json(static_cast<double>(f.moved.same_rank), static_cast<double>(f.moved.same_node),
                  static_cast<double>(f.moved.cross_node));
    x["moved_bytes"] = move_json(f.moved_bytes.same_rank, f.moved_bytes.same_node, f.moved_bytes.cross_node);
    x["planner_us"] = f.planner_us;
    x["stall_us"] = f.stall_us;
    Json rebalances = Json::array();
    for (const Switch& s : measurement_.switches()) {
      const layer::RebalanceRecord& r = s.record;
      rebalances.push_back(Json{{"request", r.request},
                                {"requested_after_step", r.requested_after_step},
                                {"adopted_after_step", r.adopted_after_step},
                                {"staged_after_step", r.staged_after_step},
                                {"switch_step", r.switch_step},
                                {"planner_us", r.planner_us},
                                {"stall_us", s.stall_us},
                                {"predicted", r.predicted.aggregate},
                                {"moved_experts", move_json(static_cast<double>(r.moved.same_rank),
                                                            static_cast<double>(r.moved.same_node),
                                                            static_cast<double>(r.moved.cross_node))},
                                {"moved_bytes", move_json(r.moved_bytes.same_rank, r.moved_bytes.same_node,
                                                          r.moved_bytes.cross_node)}});
    }
    x["rebalances"] = rebalances;
    x["expert_load"] = f.window.loads;
    return {c};
  }

 private:
  // The window's record, the predicted β of its plan and the sums over its switches.
  struct Figures {
    layer::WindowRecord window;
    eplb::Balancedness predicted;
    eplb::MoveCounts moved;
    eplb::MoveBytes moved_bytes;
    double planner_us = 0;
    double stall_us = 0;
  };
  Figures figures() const {
    Figures f;
    const std::vector<layer::WindowRecord>& windows = runtime_.windows();
    f.window = windows.at(static_cast<std::size_t>(window_));
    // Plan 0, the initial static placement, was planned from no loads: its prediction is window 0's β.
    f.predicted = windows.front().realized;
    for (const layer::RebalanceRecord& r : runtime_.rebalances()) {
      if (r.request == f.window.plan && f.window.plan != 0) f.predicted = r.predicted;
    }
    for (const Switch& s : measurement_.switches()) {
      f.moved.same_rank += s.record.moved.same_rank;
      f.moved.same_node += s.record.moved.same_node;
      f.moved.cross_node += s.record.moved.cross_node;
      f.moved_bytes.same_rank += s.record.moved_bytes.same_rank;
      f.moved_bytes.same_node += s.record.moved_bytes.same_node;
      f.moved_bytes.cross_node += s.record.moved_bytes.cross_node;
      f.planner_us += s.record.planner_us;
      f.stall_us += s.stall_us;
    }
    return f;
  }

  const EplbPlan& plan_;
  std::string policy_;
  transport::Transport& transport_;
  layer::EplbRuntime& runtime_;
  int window_;
  WindowMeasurement measurement_;
};

class EplbSeries final : public BenchSeries {
 public:
  EplbSeries(std::unique_ptr<transport::Transport> transport, std::unique_ptr<layer::EplbRuntime> runtime,
             std::shared_ptr<const EplbPlan> plan, std::string policy, std::string params_block)
      : transport_(std::move(transport)),
        runtime_(std::move(runtime)),
        plan_(std::move(plan)),
        policy_(std::move(policy)),
        params_block_(std::move(params_block)) {}

  std::string header() const override {
    const LayerSpec& s = plan_->base;
    const layer::EplbConfig& c = plan_->config;
    std::string out = fmt::format("# epsuite bench eplb (epsuite {}, git {}) on {} ranks, {} node(s)\n",
                                  kSuiteVersion, kGitSha, mpi::size(), plan_->preset.nodes);
    out += stack_header_lines(*transport_, *plan_->device, s, plan_->router, "none");
    out += fmt::format(
        "#  {:<16} policy {}, {} steps in windows of {} ({} windows), P {} slots for E {} experts, replica "
        "rule "
        "{}, {} rank(s) per node, planner {}\n",
        "eplb", policy_, plan_->steps, c.lb_interval, plan_->steps / c.lb_interval, s.slots(), s.num_experts,
        s.replica_rule == eplb::ReplicaRule::kModulo ? "modulo" : "local-first", s.ranks_per_node,
        c.planner_address.empty() ? std::string("thread on rank 0") : c.planner_address);
    out += fmt::format(
        "#  {:<16} step: wall time of the layer stack per rank, max over ranks (no warm-up: step 0 is cold); "
        "boundary: the step boundary after it (loads, planner, weight moves, switch), max over ranks\n",
        "timer");
    out += fmt::format(
        "#  {:<16} docs/eplb.md 8.5 mean / max rank load: pred = the plan in force at the window's end under "
        "the loads it was planned from (the initial static placement: under window 0's loads), real = under "
        "the window's loads (even split), rows = of the (row, expert) pairs each rank computed\n",
        "beta");
    return hashed_lines(out + params_block_ + preset_header_block(plan_->preset)) + "#\n" +
           eplb_table_titles();
  }

  int num_points() const override { return plan_->steps / plan_->config.lb_interval; }

  Result<std::unique_ptr<BenchPoint>> make_point(int index) override {
    return std::unique_ptr<BenchPoint>(
        std::make_unique<WindowPoint>(*plan_, policy_, *transport_, *runtime_, index));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<layer::EplbRuntime> runtime_;  // uses transport_: destroyed first
  std::shared_ptr<const EplbPlan> plan_;
  std::string policy_;
  std::string params_block_;
};

std::vector<ParamSpec> eplb_params() {
  std::vector<ParamSpec> s = transport_op_params();
  std::erase_if(s, [](const ParamSpec& p) {
    return p.name == "hidden" || p.name == "max-tokens" || p.name == "layout" || p.name == "quantize";
  });
  s.push_back(layers_param_spec());
  s.push_back({.name = "policy",
               .kind = ParamKind::kString,
               .default_text = kAllPolicies,
               .help = "EPLB policies, one series each (docs/eplb.md 8.2, 8.3): all, or a list of deepseek, "
                       "mindie-a2a, mindie-ag, mindie-ex, greedy, static"});
  s.push_back({.name = "steps",
               .kind = ParamKind::kInteger,
               .default_text = "32",
               .help = "Layer-stack steps per series, a multiple of --lb-interval (bench eplb)",
               .int_min = 1,
               .int_max = kMaxSteps});
  s.push_back({.name = "lb-interval",
               .kind = ParamKind::kInteger,
               .default_text = "4",
               .help = "Steps per EPLB load window, one point each (docs/eplb.md 8.6)",
               .int_min = 1,
               .int_max = layer::kMaxLbInterval});
  s.push_back({.name = "slots",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help =
                   "Physical expert slots P (docs/eplb.md 8.1), a multiple of the ranks >= E; 0 = E + R (one "
                   "redundant slot per rank)",
               .int_min = 0,
               .int_max = 1 << 20});
  s.push_back({.name = "replica-rule",
               .kind = ParamKind::kChoice,
               .default_text = "modulo",
               .help = "Which replica serves a (token, k) (docs/eplb.md 8.4)",
               .choices = {"modulo", "local-first"}});
  s.push_back({.name = "planner",
               .kind = ParamKind::kString,
               .default_text = "",
               .help =
                   "HOST:PORT of an `epsuite planner` (key in EPSUITE_EPLB_KEY); empty = a planner thread "
                   "on rank 0"});
  return s;
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<EplbPlan> plan, make_plan(context));
  const std::string& which = context.params.string("transport");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names, transport::select_transports(which));
  const LayerSpec& spec = plan->base;
  config["layout"] = transport::layout_name(spec.layout);
  config["tree"] = combine_tree_name(layer::layer_tree(spec.layout));
  config["dtype"] = transport::dtype_name(spec.dtype);
  config["layers"] = spec.num_layers;
  config["tokens_per_rank"] = spec.rank_tokens.front();
  config["slots_used"] = spec.slots();
  config["workload_used"] = plan->workload;
  config["policies"] = plan->policies;
  config["num_groups"] = plan->config.num_groups;
  config["timer"] = "MPI_Wtime";
  config["preset_resolved"] = preset_to_json(plan->preset);
  // The flags this op reads, less -n and -w (every step is timed once).
  std::vector<std::string> read;
  for (const ParamSpec& spec : driver_param_specs()) {
    if (spec.name != "iters" && spec.name != "warmup") read.push_back(spec.name);
  }
  for (const ParamSpec& spec : eplb_params()) read.push_back(spec.name);
  const std::string params_block = context.params.header_block(read);
  std::vector<SeriesPlan> series;
  for (const std::string& name : names) {
    for (const std::string& policy : plan->policies) {
      series.push_back(
          {fmt::format("{} over {}", policy, name),
           [plan, name, policy, params_block]() -> Result<std::unique_ptr<BenchSeries>> {
             const LayerSpec& spec = plan->base;
             if (policy == "greedy" && spec.slots() != spec.num_experts) {
               return Status(StatusCode::kUnavailable,
                             fmt::format("greedy places no replicas: it needs --slots {} (= E), P is {}",
                                         spec.num_experts, spec.slots()));
             }
             const transport::TransportConfig config =
                 layer::layer_transport_config(spec, MPI_COMM_WORLD, plan->device.get(), plan->timeout);
             EPS_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t,
                                  transport::make_transport(name, config, plan->fabric));
             if (!t->capabilities().supports(spec.layout)) {
               return Status(
                   StatusCode::kUnavailable,
                   fmt::format("{} declares no {} dispatch, which --mode {} runs here (try --mode {})", name,
                               transport::layout_name(spec.layout),
                               spec.layout == transport::Layout::kLl ? "ll" : "ht",
                               spec.layout == transport::Layout::kLl ? "ht" : "ll"));
             }
             layer::EplbConfig eplb_config = plan->config;
             eplb_config.policy = policy;
             EPS_ASSIGN_OR_RETURN(
                 std::unique_ptr<layer::EplbRuntime> runtime,
                 layer::EplbRuntime::create(spec, eplb_config, *t, *plan->device, mpi::rank()));
             return std::unique_ptr<BenchSeries>(
                 std::make_unique<EplbSeries>(std::move(t), std::move(runtime), plan, policy, params_block));
           },
           // A transport or policy the user named; greedy within `all` is skipped, not failed, under
           // --strict.
           (which != "all" || !plan->all_policies) && !(policy == "greedy" && plan->all_policies),
           helper_threads_per_rank(name, plan->fabric.proxy_threads)});
    }
  }
  return series;
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_eplb(eps::bench::BenchOpRegistry& registry) {
  registry.add({"eplb",
                "the layer stack under EPLB at run time: one series per policy, one point per load window "
                "(docs/eplb.md 8.4-8.7)",
                eps::bench::eplb_params, eps::bench::plan});
}
