// `epsuite bench layer --preset P --transport T [--mask-ratio a:b:step] [--schedule S] [--layers N]`:
// complete MoE layer steps (docs/layer.md 4.4, impls/layer/distributed_layer.hpp) of the preset's stack on
// every selected transport (flags: perf/bench/bench_flags.hpp LayerPlan).
//
// Points: every swept token count T (each rank holds T tokens) x every mask ratio r of --mask-ratio (every
// sample of the step has ratio r: one denoising step per point, so a sweep walks the diffusion trajectory and
// shows how a capacity schedule moves expert load and traffic). Token choice has no samples (S = 1) and
// ignores the mask ratio.
//
// An iteration runs the whole stack (every layer) once; its time is this rank's wall time of the stack, the
// driver's maximum over ranks. Each phase (route, dispatch, expert, combine, shared) is timed on every rank
// with the device synchronized at its end, summed over layers; a case reports per phase the median over the
// timed iterations of the maximum over ranks. With -c every iteration's output is compared bit for bit with
// the single-process reference of the same stack (computed once per point, untimed) on each rank's rows.
// Each point also times the machine's ceiling (perf/bench/ceiling.hpp, --ceiling): the stack's wire bytes
// copied through shared memory or put through --fabric, each rank's received bytes split evenly over the
// other ranks.
//
// Case: op "layer", mode "<layout>/<tree>", sizes {tokens, ranks, hidden, ffn, experts, top_k, shared,
// layers, seq_len}, identity + router, schedule, mask_ratio; bytes = wire bytes received by the slowest rank
// over the stack (physical; algo the same); the fields of docs/results.md 9.6 (results/op_fields.hpp
// LayerFields): phases_us, tokens_per_s (R·T / p50), expert_load [layer][E] (kept (token, slot) pairs per
// expert over every rank's tokens), dropped_pairs and dropped_tokens per layer, balancedness β per layer
// (docs/eplb.md 8.5: mean over ranks / max over ranks of the (row, expert) pairs computed; 1 = even) and
// balancedness_aggregate (Σ_l mean / Σ_l max), expert_rows per rank, compute_cost and static_cost per layer
// (docs/routing.md 3.4), expert_gflops_per_rank (an average rank's expert-phase flops, 6·H·F per (row,
// expert) pair, over the phase's time).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "impls/layer/distributed_layer.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/ceiling.hpp"
#include "perf/bench/driver.hpp"
#include "perf/bench/layer_setup.hpp"
#include "perf/bench/timer.hpp"
#include "perf/bench/transport_ops.hpp"
#include "results/op_fields.hpp"

namespace eps::bench {
namespace {

using layer::LayerSpec;
using layer::StepRecord;
using Phases = std::array<double, kLayerPhases.size()>;

Phases phase_sums(const std::vector<StepRecord>& records) {
  Phases out{};
  for (const StepRecord& r : records) {
    const layer::PhaseTimes& p = r.phases;
    const Phases v = {p.route_us, p.dispatch_us, p.expert_us, p.combine_us, p.shared_us};
    for (std::size_t i = 0; i < v.size(); ++i) out[i] += v[i];
  }
  return out;
}

class LayerMeasurement final : public Measurement {
 public:
  LayerMeasurement(layer::DistributedLayer& stack, const LayerSpec& spec, double timeout)
      : stack_(stack), spec_(spec), timeout_(timeout) {}

  Status prepare(int, bool checking) override {
    if (checking && !reference_) {
      EPS_ASSIGN_OR_RETURN(std::vector<bf16> want, layer::reference_stack_output(spec_));
      reference_ = std::move(want);
    }
    return Status();
  }
  Result<double> run(int) override {
    std::vector<StepRecord> records;
    EPS_ASSIGN_OR_RETURN(const double us, timed_us([&]() -> Status {
                           EPS_ASSIGN_OR_RETURN(records, stack_.run());
                           return Status();
                         }));
    phases_.push_back(phase_sums(records));
    last_ = std::move(records);
    return us;
  }
  Result<Mismatches> check(int) override {
    EPS_ASSIGN_OR_RETURN(const std::vector<bf16> got, stack_.output());
    const layer::OutputMismatches m = layer::compare_with_reference(spec_, mpi::rank(), got, *reference_);
    return Mismatches{m.count, m.first};
  }
  // Phase times: the maximum over ranks; counts of the last iteration summed over ranks, β per layer.
  Status settle() override;

  // Per phase, the median over the last `timed` iterations of the maximum over ranks.
  Phases phase_medians(std::size_t timed) const {
    timed = std::min(timed, phases_.size());
    Phases out{};
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::vector<double> v;
      for (std::size_t j = phases_.size() - timed; j < phases_.size(); ++j) v.push_back(phases_[j][i]);
      out[i] = median(v);
    }
    return out;
  }
  const LayerFields& totals() const { return totals_; }
  const std::vector<std::int64_t>& wire_received() const { return wire_received_; }  // [rank], the stack

 private:
  layer::DistributedLayer& stack_;
  const LayerSpec& spec_;
  double timeout_;
  std::optional<std::vector<bf16>> reference_;
  std::vector<Phases> phases_;  // per iteration, this rank's; after settle() the maximum over ranks
  std::vector<StepRecord> last_;
  LayerFields totals_;
  std::vector<std::int64_t> wire_received_;
};

Status LayerMeasurement::settle() {
  const Deadline deadline(timeout_);
  EPS_RETURN_IF_ERROR(
      mpi::allreduce_in_place(phases_.data()->data(), static_cast<int>(phases_.size() * kLayerPhases.size()),
                              MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, deadline, "layer phase times"));
  LayerFields& t = totals_;
  std::int64_t rows_here = 0, wire_here = 0;
  double mean_sum = 0.0, max_sum = 0.0;
  for (const StepRecord& r : last_) {
    std::vector<std::int64_t> counts = r.expert_load;
    counts.insert(counts.end(), {r.dropped_pairs, r.dropped_tokens, r.compute_cost, r.static_cost});
    EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(counts.data(), static_cast<int>(counts.size()), MPI_INT64_T,
                                                MPI_SUM, MPI_COMM_WORLD, deadline, "layer statistics"));
    const auto tail = counts.end() - 4;
    t.dropped_pairs.push_back(tail[0]);
    t.dropped_tokens.push_back(tail[1]);
    t.compute_cost.push_back(tail[2]);
    t.static_cost.push_back(tail[3]);
    t.expert_load.emplace_back(counts.begin(), tail);
    EPS_ASSIGN_OR_RETURN(const std::vector<std::int64_t> rows,
                         gather_int64(r.expert_rows, deadline, "expert rows"));
    const std::int64_t most = *std::max_element(rows.begin(), rows.end());
    const double mean = std::accumulate(rows.begin(), rows.end(), 0.0) / static_cast<double>(rows.size());
    t.balancedness.push_back(most > 0 ? mean / static_cast<double>(most) : 1.0);
    mean_sum += mean;
    max_sum += static_cast<double>(most);
    rows_here += r.expert_rows;
    wire_here += r.wire.received;
  }
  t.balancedness_aggregate = max_sum > 0 ? mean_sum / max_sum : 1.0;
  EPS_ASSIGN_OR_RETURN(t.expert_rows, gather_int64(rows_here, deadline, "expert rows"));
  EPS_ASSIGN_OR_RETURN(wire_received_, gather_int64(wire_here, deadline, "wire bytes"));
  return Status();
}

class LayerPoint final : public BenchPoint {
 public:
  LayerPoint(const LayerPlan& plan, LayerSpec spec, std::unique_ptr<layer::DistributedLayer> stack,
             float ratio)
      : spec_(std::move(spec)),
        stack_(std::move(stack)),
        ratio_(ratio),
        measurement_(*stack_, spec_, plan.timeout) {
    // The stack's wire bytes are known after its own measurement settled (every rank's, in rank order).
    ceiling_ = make_machine_ceiling(
        plan.ceiling,
        [this]() -> Result<ByteMatrix> { return received_evenly(measurement_.wire_received()); }, plan.fabric,
        plan.seed, plan.timeout);
  }

  std::vector<Measurement*> measurements() override { return {&measurement_}; }
  MachineCeiling* ceiling() override { return ceiling_.get(); }

  PointReport report(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    LayerFields f = measurement_.totals();
    f.phases_us = measurement_.phase_medians(m.times_us.size());
    const double p50 = percentile_us(m, 50);
    f.tokens_per_s = p50 > 0 ? static_cast<double>(spec_.num_tokens()) / (p50 * 1e-6) : 0.0;
    // The expert phase's rate per rank: the (row, expert) pairs of an average rank, 2·3·H·F flops each, over
    // the phase's median time (max over ranks), so a slow rank lowers it.
    const double pairs = std::accumulate(f.expert_rows.begin(), f.expert_rows.end(), 0.0) /
                         static_cast<double>(std::max<std::size_t>(f.expert_rows.size(), 1));
    const double expert_us = f.phases_us[2];
    f.expert_gflops_per_rank =
        expert_us > 0 ? pairs * 6.0 * spec_.hidden * spec_.ffn / (expert_us * 1e3) : 0.0;
    f.mask_ratio = ratio_;
    const bool tc = std::holds_alternative<routing::TokenChoiceConfig>(spec_.router);
    const std::vector<std::int64_t>& dropped = tc ? f.dropped_pairs : f.dropped_tokens;
    const double beta =
        f.balancedness.empty() ? 1.0 : *std::min_element(f.balancedness.begin(), f.balancedness.end());
    PointReport report;
    report.cells = {static_cast<double>(ratio_), spec_.rank_tokens.front(), p50, f.tokens_per_s};
    report.cells.insert(report.cells.end(), f.phases_us.begin(), f.phases_us.end());
    report.cells.insert(report.cells.end(),
                        {std::accumulate(dropped.begin(), dropped.end(), std::int64_t{0}), beta});
    const std::vector<std::int64_t>& wire = measurement_.wire_received();
    CaseParts c;
    c.sizes = {{"tokens", spec_.rank_tokens.front()}, {"seq_len", spec_.seq_len}};
    c.identity["mask_ratio"] = fmt::format("{}", ratio_);
    c.algo_bytes = wire.empty() ? 0.0 : static_cast<double>(wire[static_cast<std::size_t>(m.slowest_rank)]);
    c.physical_bytes = c.algo_bytes;
    c.extra = to_json(f);
    report.cases.push_back(std::move(c));
    return report;
  }

 private:
  LayerSpec spec_;
  std::unique_ptr<layer::DistributedLayer> stack_;
  float ratio_;
  LayerMeasurement measurement_;
  std::unique_ptr<MachineCeiling> ceiling_;  // null: not measured (LayerPlan::ceiling)
};

class LayerSeries final : public BenchSeries {
 public:
  LayerSeries(std::unique_ptr<transport::Transport> transport, std::shared_ptr<const LayerPlan> plan)
      : transport_(std::move(transport)), plan_(std::move(plan)) {}

  SeriesInfo info() const override {
    SeriesInfo info = stack_series(*transport_, *plan_->device, plan_->base, plan_->preset, plan_->router,
                                   plan_->schedule, "layer");
    info.echo.emplace_back(
        "timer",
        "wall time of the whole stack per rank, max over ranks; phases: device synchronized at "
        "each end, summed over layers, max over ranks, median over iterations");
    info.echo.push_back(ceiling_echo(plan_->ceiling));
    if (!plan_->ceiling.empty()) {
      info.echo.emplace_back(
          "ceiling bytes",
          "the stack's wire bytes received by each rank, split evenly over the other ranks (the "
          "layer does not count bytes per peer)");
    }
    info.table = layer_table();
    info.base.identity["router"] = plan_->router;
    info.base.identity["schedule"] = plan_->schedule;
    return info;
  }

  int num_points() const override {
    return static_cast<int>(plan_->preset.tokens.values.size() * plan_->mask_ratios.size());
  }

  Result<std::unique_ptr<BenchPoint>> make_point(int index) override {
    const std::size_t ratios = plan_->mask_ratios.size();
    const std::int64_t tokens = plan_->preset.tokens.values[static_cast<std::size_t>(index) / ratios];
    const float ratio = plan_->mask_ratios[static_cast<std::size_t>(index) % ratios];
    LayerSpec spec = plan_->base;
    spec.rank_tokens.assign(static_cast<std::size_t>(mpi::size()), tokens);
    if (std::holds_alternative<routing::ExpertChoiceConfig>(spec.router)) {
      spec.mask_ratio.assign(static_cast<std::size_t>(spec.num_tokens() / spec.seq_len), ratio);
    }
    EPS_RETURN_IF_ERROR(layer::validate_layer_spec(spec));
    EPS_ASSIGN_OR_RETURN(std::unique_ptr<layer::DistributedLayer> stack,
                         layer::DistributedLayer::create(spec, *transport_, *plan_->device, mpi::rank()));
    // One untimed stack first: a warm transport and warm device buffers.
    EPS_RETURN_IF_ERROR(stack->run().status());
    return std::unique_ptr<BenchPoint>(
        std::make_unique<LayerPoint>(*plan_, std::move(spec), std::move(stack), ratio));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<const LayerPlan> plan_;
};

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<LayerPlan> plan, make_layer_plan(context, config));
  return one_series_per_transport(
      context.params, plan->fabric, [plan](const std::string& name) -> Result<std::unique_ptr<BenchSeries>> {
        LayerSpec largest = plan->base;
        largest.rank_tokens.assign(static_cast<std::size_t>(mpi::size()), plan->preset.max_tokens);
        EPS_ASSIGN_OR_RETURN(
            std::unique_ptr<transport::Transport> t,
            transport::make_transport(
                name,
                layer::layer_transport_config(largest, MPI_COMM_WORLD, plan->device.get(), plan->timeout),
                plan->fabric));
        return std::unique_ptr<BenchSeries>(std::make_unique<LayerSeries>(std::move(t), plan));
      });
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_layer(eps::bench::BenchOpRegistry& registry) {
  registry.add({"layer",
                "complete MoE layer steps: route, dispatch, expert, combine, shared (docs/layer.md 4.4)",
                eps::bench::layer_params, eps::bench::plan});
}
