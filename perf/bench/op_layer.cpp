// `epsuite bench layer --preset P --transport T [--mask-ratio a:b:step] [--schedule S] [--layers N]`:
// complete MoE layer steps (docs/layer.md 4.4, impls/layer/distributed_layer.hpp) of the preset's stack on
// every selected transport.
//
// Points: every swept token count T (each rank holds T tokens) x every mask ratio r of --mask-ratio (every
// sample of the step has ratio r: one denoising step per point, so a sweep walks the diffusion trajectory and
// shows how a capacity schedule moves expert load and traffic). Router from the preset (--router tc / ec
// picks a side): token choice (K, softmax or group-limited sigmoid, dropless) or expert choice with the
// preset's schedule (--schedule overrides: `static` uses the static k, any other docs/routing.md 3.4 schedule
// the preset's k_min..k_max). Token choice has no samples (S = 1) and ignores the mask ratio.
//
// An iteration runs the whole stack (every layer) once; its time is this rank's wall time of the stack, the
// driver's maximum over ranks. Each phase (route, dispatch, expert, combine, shared) is timed on every rank
// with the device synchronized at its end, summed over layers; a case reports per phase the median over the
// timed iterations of the maximum over ranks. With -c every iteration's output is compared bit for bit with
// the single-process reference of the same stack (computed once per point, untimed) on each rank's rows.
// Each point also times the machine's ceiling (perf/bench/ceiling.hpp, --ceiling): the
// stack's wire bytes copied through shared memory or put through --fabric, each rank's received bytes split
// evenly over the other ranks.
//
// Case: op "layer", mode "<layout>/<tree>", sizes {tokens, ranks, hidden, ffn, experts, top_k, shared,
// layers, seq_len}, identity + router, schedule, mask_ratio; bytes = wire bytes received by the slowest rank
// over the stack (physical; algo the same); extra: phases_us, tokens_per_s (R·T / p50), expert_load
// [layer][E] (kept (token, slot) pairs per expert over every rank's tokens), dropped_pairs and dropped_tokens
// per layer, balancedness β per layer (docs/eplb.md 8.5: mean over ranks / max over ranks of the (row,
// expert) pairs computed; 1 = even) and balancedness_aggregate (Σ_l mean / Σ_l max), expert_rows per rank,
// compute_cost and static_cost per layer (docs/routing.md 3.4), expert_gflops_per_rank (an average rank's
// expert-phase flops, 6·H·F per (row, expert) pair, over the phase's time).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "impls/fabric/fabric_selection.hpp"
#include "impls/layer/distributed_layer.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/ceiling.hpp"
#include "perf/bench/layer_setup.hpp"
#include "perf/bench/oversubscription.hpp"
#include "perf/bench/presets.hpp"
#include "perf/bench/table.hpp"
#include "perf/bench/transport_ops.hpp"
#include "reference/common/version.hpp"

namespace eps::bench {
namespace {

using layer::LayerSpec;
using layer::StepRecord;

constexpr int kPhases = 5;
constexpr const char* kPhaseNames[kPhases] = {"route", "dispatch", "expert", "combine", "shared"};

struct LayerPlan {
  ResolvedPreset preset;
  LayerSpec base;  // everything but rank_tokens and mask_ratio
  std::vector<float> mask_ratios;
  std::string schedule;  // as used: "static", "linear_reverse", ... ("none" for token choice)
  std::string router;    // the preset's router name
  double timeout = kDefaultTimeoutSeconds;
  fabric::FabricSelection fabric;
  std::shared_ptr<device::Device> device;
  std::string ceiling;  // the ceiling each point times next to the op (ceiling.hpp choose_ceiling), "" none
  std::uint64_t seed = 0;
};

// --mask-ratio: "r", "r1,r2,...", or "a:b:step" (a, a + step, ... up to b), every value in [0, 1].
Result<std::vector<float>> parse_mask_ratios(const std::string& text) {
  auto number = [&](std::string_view s) -> Result<double> {
    std::string owned(s);
    char* end = nullptr;
    const double v = std::strtod(owned.c_str(), &end);
    if (owned.empty() || end != owned.c_str() + owned.size() || !std::isfinite(v)) {
      return invalid_argument("--mask-ratio", "'{}' is not a number (expected r, r1,r2,... or a:b:step)", s);
    }
    return v;
  };
  std::vector<double> values;
  if (std::count(text.begin(), text.end(), ':') == 2) {
    const std::size_t c1 = text.find(':'), c2 = text.find(':', c1 + 1);
    EPS_ASSIGN_OR_RETURN(const double a, number(std::string_view(text).substr(0, c1)));
    EPS_ASSIGN_OR_RETURN(const double b, number(std::string_view(text).substr(c1 + 1, c2 - c1 - 1)));
    EPS_ASSIGN_OR_RETURN(const double step, number(std::string_view(text).substr(c2 + 1)));
    if (!(step > 0) || b < a)
      return invalid_argument("--mask-ratio", "a:b:step needs a <= b and step > 0, got '{}'", text);
    for (int i = 0; a + i * step <= b + 1e-9 && i <= 4096; ++i) values.push_back(std::min(a + i * step, b));
  } else {
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      EPS_ASSIGN_OR_RETURN(const double v, number(std::string_view(text).substr(start, comma - start)));
      values.push_back(v);
      start = comma + 1;
    }
  }
  std::vector<float> out;
  for (double v : values) {
    if (!(v >= 0.0 && v <= 1.0)) return out_of_range("--mask-ratio", 0.0, 1.0, v);
    out.push_back(static_cast<float>(v));
  }
  return out;
}

void choose_layout(const Params& p, LayerSpec& spec) {
  if (p.string("mode") == "ll") {
    spec.layout = transport::Layout::kLl;
  } else {
    spec.layout = p.string("layout") == "expert-major" ? transport::Layout::kHtExpertMajor
                                                       : transport::Layout::kHtRankMajor;
  }
}

Result<std::shared_ptr<LayerPlan>> make_plan(const BenchContext& context) {
  const Params& p = context.params;
  auto plan = std::make_shared<LayerPlan>();
  plan->timeout = p.number("timeout");
  plan->fabric = fabric::fabric_selection_from(p);
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(plan->fabric));
  EPS_ASSIGN_OR_RETURN(mpi::NodeLayout nodes, mpi::node_layout(MPI_COMM_WORLD, Deadline(plan->timeout)));
  EPS_ASSIGN_OR_RETURN(plan->preset, resolve_preset_flags(p, nodes));
  EPS_ASSIGN_OR_RETURN(plan->ceiling, choose_ceiling(p.string("ceiling"), nodes.nodes()));
  plan->seed = static_cast<std::uint64_t>(p.integer("seed"));
  const Preset& preset = *plan->preset.preset;
  EPS_ASSIGN_OR_RETURN(plan->mask_ratios, parse_mask_ratios(p.string("mask-ratio")));
  LayerSpec& spec = plan->base;
  spec = preset_stack(plan->preset, static_cast<std::uint64_t>(p.integer("seed")), p.integer("layers"));
  EPS_ASSIGN_OR_RETURN(spec.router,
                       preset_router(plan->preset, p.string("router"), p.string("schedule"), plan->schedule));
  const bool expert_choice = std::holds_alternative<routing::ExpertChoiceConfig>(spec.router);
  spec.seq_len = expert_choice ? preset.seq_len : 1;
  plan->router = expert_choice ? "ec" : (preset.router == "ec" ? "tc-softmax" : std::string(preset.router));
  if (p.string("routing") != "router") {
    EPS_ASSIGN_OR_RETURN(spec.routing_workload, data::parse_workload(p.string("routing")));
    spec.routing_top_k =
        spec.routing_workload->trace ? spec.routing_workload->trace->top_k : static_cast<int>(preset.topk);
    plan->router = "workload " + data::workload_name(*spec.routing_workload);
    plan->schedule = "none";
  }
  choose_layout(p, spec);
  const std::string& dtype = p.string("dtype");
  const std::string_view chosen = dtype == "preset" ? preset.dispatch_dtype : std::string_view(dtype);
  spec.dtype = chosen == "fp8" ? dispatch::PayloadType::kFp8 : dispatch::PayloadType::kBf16;
  // Validate the largest point now, so that bad shapes are refused before any transport is made.
  LayerSpec largest = spec;
  largest.rank_tokens.assign(static_cast<std::size_t>(mpi::size()), plan->preset.max_tokens);
  if (plan->preset.max_tokens % spec.seq_len != 0 || plan->preset.max_tokens == 0) {
    return invalid_argument("--tokens",
                            "each swept count must be a positive multiple of seq_len {}, got max {}",
                            spec.seq_len, plan->preset.max_tokens);
  }
  EPS_RETURN_IF_ERROR(layer::validate_layer_spec(largest));
  EPS_ASSIGN_OR_RETURN(plan->device, open_bench_device(p, plan->timeout));
  return plan;
}

// Per iteration and phase, this rank's µs; after settle() the maximum over ranks.
using PhaseRows = std::vector<std::array<double, kPhases>>;

std::array<double, kPhases> phase_sums(const std::vector<StepRecord>& records) {
  std::array<double, kPhases> out{};
  for (const StepRecord& r : records) {
    const layer::PhaseTimes& p = r.phases;
    const double v[kPhases] = {p.route_us, p.dispatch_us, p.expert_us, p.combine_us, p.shared_us};
    for (int i = 0; i < kPhases; ++i) out[i] += v[i];
  }
  return out;
}

// Summed or maximal over ranks once, after the last iteration.
struct StepTotals {
  std::vector<std::vector<std::int64_t>> expert_load;  // [layer][E], summed over ranks
  std::vector<std::int64_t> dropped_pairs, dropped_tokens, compute_cost, static_cost;  // [layer], summed
  std::vector<double> balancedness;                                                    // [layer]
  double balancedness_aggregate = 1.0;      // docs/eplb.md 8.5: Σ_l mean / Σ_l max
  std::vector<std::int64_t> expert_rows;    // [rank], over every layer
  std::vector<std::int64_t> wire_received;  // [rank], over the stack
};

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
  Status settle() override;

  const PhaseRows& phases() const { return phases_; }
  const StepTotals& totals() const { return totals_; }

 private:
  layer::DistributedLayer& stack_;
  const LayerSpec& spec_;
  double timeout_;
  std::optional<std::vector<bf16>> reference_;
  PhaseRows phases_;
  std::vector<StepRecord> last_;
  StepTotals totals_;
};

Status LayerMeasurement::settle() {
  const Deadline deadline(timeout_);
  std::vector<double> flat;
  for (const auto& row : phases_) flat.insert(flat.end(), row.begin(), row.end());
  EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(flat.data(), static_cast<int>(flat.size()), MPI_DOUBLE, MPI_MAX,
                                              MPI_COMM_WORLD, deadline, "layer phase times"));
  for (std::size_t i = 0; i < phases_.size(); ++i)
    std::copy_n(flat.begin() + i * kPhases, kPhases, phases_[i].begin());
  StepTotals& t = totals_;
  std::int64_t rows_here = 0;
  std::int64_t wire_here = 0;
  double mean_sum = 0.0;
  double max_sum = 0.0;
  for (const StepRecord& r : last_) {
    std::vector<std::int64_t> counts = r.expert_load;
    counts.push_back(r.dropped_pairs);
    counts.push_back(r.dropped_tokens);
    counts.push_back(r.compute_cost);
    counts.push_back(r.static_cost);
    EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(counts.data(), static_cast<int>(counts.size()), MPI_INT64_T,
                                                MPI_SUM, MPI_COMM_WORLD, deadline, "layer statistics"));
    t.static_cost.push_back(counts.back());
    counts.pop_back();
    t.compute_cost.push_back(counts.back());
    counts.pop_back();
    t.dropped_tokens.push_back(counts.back());
    counts.pop_back();
    t.dropped_pairs.push_back(counts.back());
    counts.pop_back();
    t.expert_load.push_back(std::move(counts));
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
  EPS_ASSIGN_OR_RETURN(t.wire_received, gather_int64(wire_here, deadline, "wire bytes"));
  return Status();
}

// Columns: mask ratio, tokens per rank, p50 of the stack (µs), tokens/s over all ranks, the five phases'
// medians (µs), dropped (token, slot) pairs (token choice) or dropped tokens (expert choice) summed over
// layers, β of the least balanced layer, the ceiling's p50 (µs) and ceiling p50 / step p50 (3 significant
// digits: a step is mostly compute; N/A when not measured), #wrong.
std::string layer_table_titles() {
  return fmt::format(
      "#{:>6} {:>8} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>6} {:>10} {:>9} {:>7}\n"
      "#{:>6} {:>8} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>6} {:>10} {:>9} {:>7}\n",
      "mask", "tokens", "step p50", "tokens/s", "route", "dispatch", "expert", "combine", "shared", "dropped",
      "beta", "ceil p50", "ceil/", "#wrong", "ratio", "/rank", "(us)", "", "(us)", "(us)", "(us)", "(us)",
      "(us)", "", "(min)", "(us)", "step", "");
}

class LayerPoint final : public BenchPoint {
 public:
  LayerPoint(const LayerPlan& plan, LayerSpec spec, transport::Transport& transport,
             std::unique_ptr<layer::DistributedLayer> stack, float ratio)
      : plan_(plan),
        spec_(std::move(spec)),
        transport_(transport),
        stack_(std::move(stack)),
        ratio_(ratio),
        measurement_(*stack_, spec_, plan.timeout) {
    // The stack's wire bytes are known after its own measurement settled (every rank's, in rank order).
    ceiling_ = make_machine_ceiling(
        plan.ceiling,
        [this]() -> Result<ByteMatrix> { return received_evenly(measurement_.totals().wire_received); },
        plan.fabric, plan.seed, plan.timeout);
  }

  std::vector<Measurement*> measurements() override {
    if (!ceiling_) return {&measurement_};
    return {&measurement_, ceiling_.get()};
  }

  std::string row(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const std::array<double, kPhases> p = phase_medians(m);
    const StepTotals& t = measurement_.totals();
    const bool tc = std::holds_alternative<routing::TokenChoiceConfig>(spec_.router);
    const auto& dropped = tc ? t.dropped_pairs : t.dropped_tokens;
    const std::int64_t dropped_sum = std::accumulate(dropped.begin(), dropped.end(), std::int64_t{0});
    const double beta =
        t.balancedness.empty() ? 1.0 : *std::min_element(t.balancedness.begin(), t.balancedness.end());
    const double p50 = median(m.times_us);
    const std::optional<double> ceiling_us = ceiling_p50(measured);
    const std::string ceiling_text = ceiling_us ? fmt::format("{:.2f}", *ceiling_us) : "N/A";
    const std::string ratio_text =
        ceiling_us ? fmt::format("{:.3g}", ceiling_ratio(*ceiling_us, p50)) : std::string("N/A");
    return fmt::format(
        " {:>6.3f} {:>8} {:>12.2f} {:>12.0f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>9} "
        "{:>6.3f} {:>10} {:>9} {:>7}\n",
        ratio_, spec_.rank_tokens.front(), p50, tokens_per_s(p50), p[0], p[1], p[2], p[3], p[4], dropped_sum,
        beta, ceiling_text, ratio_text, m.check ? std::to_string(m.check->mismatches) : std::string("N/A"));
  }

  std::vector<CaseResult> cases(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const StepTotals& t = measurement_.totals();
    CaseResult c = stack_case("layer", transport_, *plan_.device, spec_, plan_.preset);
    c.sizes.emplace_back("seq_len", spec_.seq_len);
    c.identity["router"] = plan_.router;
    c.identity["schedule"] = plan_.schedule;
    c.identity["mask_ratio"] = fmt::format("{}", ratio_);
    c.times_us = m.times_us;
    const std::int64_t slowest_wire =
        t.wire_received.empty() ? 0 : t.wire_received[static_cast<std::size_t>(m.slowest_rank)];
    c.algo_bytes = static_cast<double>(slowest_wire);
    c.physical_bytes = static_cast<double>(slowest_wire);
    c.slowest_rank = m.slowest_rank;
    c.check = m.check;
    if (const std::optional<double> us = ceiling_p50(measured)) c.ceiling = Ceiling{*us, ceiling_->kind()};
    const std::array<double, kPhases> p = phase_medians(m);
    Json phases = Json::object();
    for (int i = 0; i < kPhases; ++i) phases[kPhaseNames[i]] = p[i];
    c.extra["phases_us"] = phases;
    c.extra["tokens_per_s"] = tokens_per_s(median(m.times_us));
    // The expert phase's rate per rank: the (row, expert) pairs of an average rank, 2·3·H·F flops each, over
    // the phase's median time (max over ranks), so a slow rank lowers it.
    const double pairs = std::accumulate(t.expert_rows.begin(), t.expert_rows.end(), 0.0) /
                         static_cast<double>(std::max<std::size_t>(t.expert_rows.size(), 1));
    const double flops = pairs * 6.0 * spec_.hidden * spec_.ffn;
    c.extra["expert_gflops_per_rank"] = p[2] > 0 ? flops / (p[2] * 1e3) : 0.0;
    c.extra["mask_ratio"] = ratio_;
    c.extra["expert_load"] = t.expert_load;
    c.extra["dropped_pairs"] = t.dropped_pairs;
    c.extra["dropped_tokens"] = t.dropped_tokens;
    c.extra["balancedness"] = t.balancedness;
    c.extra["balancedness_aggregate"] = t.balancedness_aggregate;
    c.extra["expert_rows"] = t.expert_rows;
    c.extra["compute_cost"] = t.compute_cost;
    c.extra["static_cost"] = t.static_cost;
    return {c};
  }

 private:
  // Per phase, the median over the timed iterations (the last times_us.size() ones) of the max over ranks.
  std::array<double, kPhases> phase_medians(const Measured& m) const {
    const PhaseRows& rows = measurement_.phases();
    const std::size_t timed = std::min(rows.size(), m.times_us.size());
    std::array<double, kPhases> out{};
    for (int i = 0; i < kPhases; ++i) {
      std::vector<double> v;
      for (std::size_t j = rows.size() - timed; j < rows.size(); ++j) v.push_back(rows[j][i]);
      out[i] = median(v);
    }
    return out;
  }
  double tokens_per_s(double p50_us) const {
    return p50_us > 0 ? static_cast<double>(spec_.num_tokens()) / (p50_us * 1e-6) : 0.0;
  }

  const LayerPlan& plan_;
  LayerSpec spec_;
  transport::Transport& transport_;
  std::unique_ptr<layer::DistributedLayer> stack_;
  float ratio_;
  LayerMeasurement measurement_;
  std::unique_ptr<MachineCeiling> ceiling_;  // null: not measured (LayerPlan::ceiling)
};

class LayerSeries final : public BenchSeries {
 public:
  LayerSeries(std::unique_ptr<transport::Transport> transport, std::shared_ptr<const LayerPlan> plan,
              std::string params_block)
      : transport_(std::move(transport)), plan_(std::move(plan)), params_block_(std::move(params_block)) {}

  std::string header() const override {
    const LayerSpec& s = plan_->base;
    std::string out = fmt::format("# epsuite bench layer (epsuite {}, git {}) on {} ranks, {} node(s)\n",
                                  kSuiteVersion, kGitSha, mpi::size(), plan_->preset.nodes);
    out += stack_header_lines(*transport_, *plan_->device, s, plan_->router, plan_->schedule);
    out += fmt::format(
        "#  {:<16} wall time of the whole stack per rank, max over ranks; phases: device "
        "synchronized at each end, summed over layers, max over ranks, median over iterations\n",
        "timer");
    out += ceiling_header_line(plan_->ceiling);
    if (!plan_->ceiling.empty()) {
      out += fmt::format(
          "#  {:<16} the stack's wire bytes received by each rank, split evenly over the other ranks (the "
          "layer does not count bytes per peer)\n",
          "ceiling bytes");
    }
    return hashed_lines(out + params_block_ + preset_header_block(plan_->preset)) + "#\n" +
           layer_table_titles();
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
        std::make_unique<LayerPoint>(*plan_, std::move(spec), *transport_, std::move(stack), ratio));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<const LayerPlan> plan_;
  std::string params_block_;
};

std::vector<ParamSpec> layer_params() {
  std::vector<ParamSpec> s = transport_op_params();
  std::erase_if(s, [](const ParamSpec& p) {
    return p.name == "workload" || p.name == "hidden" || p.name == "max-tokens" || p.name == "quantize";
  });
  s.push_back({.name = "mask-ratio",
               .kind = ParamKind::kString,
               .default_text = "0.5",
               .help =
                   "Mask ratio of every sample (the denoising step, docs/routing.md 3.4): r, r1,r2,... or "
                   "a:b:step; one point per value"});
  s.push_back({.name = "schedule",
               .kind = ParamKind::kString,
               .default_text = "preset",
               .help = "Expert-choice capacity schedule: preset, static, linear, linear_reverse, cosine, "
                       "cosine_reverse, bell, bell_gaussian:S, bell_gaussian_reverse:S"});
  s.push_back(
      {.name = "router",
       .kind = ParamKind::kChoice,
       .default_text = "preset",
       .help = "Router: the preset's, tc (its token choice: K, scores, groups) or ec (expert choice with its "
               "S, k and schedule)",
       .choices = {"preset", "tc", "ec"}});
  s.push_back(
      {.name = "routing",
       .kind = ParamKind::kString,
       .default_text = "router",
       .help = "router (route the logits with --router), or a docs/numerics.md 2.3 workload that gives every "
               "token's experts: trace:FILE (a recorded routing trace), zipf:S, hot:E,P, masked:P, ..."});
  s.push_back(layers_param_spec());
  return s;
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<LayerPlan> plan, make_plan(context));
  const std::string& which = context.params.string("transport");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names, transport::select_transports(which));
  config["layout"] = transport::layout_name(plan->base.layout);
  config["tree"] = combine_tree_name(layer::layer_tree(plan->base.layout));
  config["dtype"] = transport::dtype_name(plan->base.dtype);
  config["layers"] = plan->base.num_layers;
  config["schedule_used"] = plan->schedule;
  config["mask_ratios"] = plan->mask_ratios;
  config["timer"] = "MPI_Wtime";
  config["ceiling"] = plan->ceiling.empty() ? std::string("none") : plan->ceiling;
  config["preset_resolved"] = preset_to_json(plan->preset);
  const std::string params_block = context.params_block;
  std::vector<SeriesPlan> series;
  for (const std::string& name : names) {
    series.push_back(
        {name,
         [plan, name, params_block]() -> Result<std::unique_ptr<BenchSeries>> {
           LayerSpec largest = plan->base;
           largest.rank_tokens.assign(static_cast<std::size_t>(mpi::size()), plan->preset.max_tokens);
           const transport::TransportConfig config =
               layer::layer_transport_config(largest, MPI_COMM_WORLD, plan->device.get(), plan->timeout);
           EPS_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t,
                                transport::make_transport(name, config, plan->fabric));
           return std::unique_ptr<BenchSeries>(
               std::make_unique<LayerSeries>(std::move(t), plan, params_block));
         },
         which != "all", helper_threads_per_rank(name, plan->fabric.proxy_threads)});
  }
  return series;
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_layer(eps::bench::BenchOpRegistry& registry) {
  registry.add({"layer",
                "complete MoE layer steps: route, dispatch, expert, combine, shared (docs/layer.md 4.4)",
                eps::bench::layer_params, eps::bench::plan});
}
