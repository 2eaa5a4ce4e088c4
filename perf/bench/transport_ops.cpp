#include "perf/bench/transport_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "impls/device/device_registry.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/oversubscription.hpp"
#include "perf/bench/table.hpp"
#include "reference/common/version.hpp"
#include "reference/data/workload.hpp"

namespace eps::bench {
namespace {

using transport::CombineTree;
using transport::Layout;

constexpr std::uint64_t kPayloadSeedOffset = 1;

// --quantize (docs/dispatch.md 5.8): the transport quantizes bf16 rows itself, which only an fp8 dispatch
// can.
Status choose_quantize(const std::string& quantize, TransportPlan& plan) {
  if (quantize == "off") return Status();
  if (plan.dtype != dispatch::PayloadType::kFp8) {
    return invalid_argument("--quantize", "{} needs fp8 payloads (--dtype fp8), got {}", quantize,
                            transport::dtype_name(plan.dtype));
  }
  plan.quantize = quantize == "round-scale" ? Fp8ScaleMode::kRoundScale : Fp8ScaleMode::kAmax;
  return Status();
}

std::string_view quantize_name(const std::optional<Fp8ScaleMode>& quantize) {
  if (!quantize) return "off";
  return *quantize == Fp8ScaleMode::kRoundScale ? "round-scale" : "amax";
}

Status choose_contract(const Params& p, TransportPlan& plan) {
  if (p.string("mode") == "ll") {
    plan.layout = Layout::kLl;
    plan.tree = CombineTree::kLlWeighted;
  } else if (p.string("layout") == "expert-major") {
    plan.layout = Layout::kHtExpertMajor;
    plan.tree = CombineTree::kLlWeighted;
  } else {
    plan.layout = Layout::kHtRankMajor;
    plan.tree = plan.preset.nodes > 1 ? CombineTree::kHtTwoLevel : CombineTree::kHtRank;
  }
  const std::string& dtype = p.string("dtype");
  const std::string_view chosen =
      dtype == "preset" ? plan.preset.preset->dispatch_dtype : std::string_view(dtype);
  plan.dtype = chosen == "fp8" ? dispatch::PayloadType::kFp8 : dispatch::PayloadType::kBf16;
  EPS_RETURN_IF_ERROR(choose_quantize(p.string("quantize"), plan));
  plan.hidden = p.integer("hidden") > 0 ? static_cast<int>(p.integer("hidden"))
                                        : static_cast<int>(plan.preset.preset->hidden);
  if (plan.dtype == dispatch::PayloadType::kFp8 && plan.hidden % 128 != 0) {
    return invalid_argument("--hidden",
                            "{} is not a multiple of 128, required for fp8 payloads (docs/numerics.md 1.2)",
                            plan.hidden);
  }
  const std::int64_t t_max = p.integer("max-tokens") > 0 ? p.integer("max-tokens") : plan.preset.max_tokens;
  for (std::int64_t t : plan.preset.tokens.values) {
    if (t > t_max) {
      return invalid_argument("--tokens",
                              "{} tokens per rank exceed T_max = {} (--max-tokens); T_r > T_max is an "
                              "input error (docs/dispatch.md 5.4)",
                              t, t_max);
    }
  }
  plan.max_tokens = static_cast<int>(t_max);
  return Status();
}

Status check_workload(const TransportPlan& plan) {
  EPS_ASSIGN_OR_RETURN(data::WorkloadSpec spec, data::parse_workload(plan.workload));
  const Status valid =
      data::validate_workload(spec, {plan.preset.ranks, static_cast<int>(plan.preset.preset->experts),
                                     static_cast<int>(plan.preset.preset->topk)});
  if (!valid.ok()) return invalid_argument("--workload", "{}", valid.message());
  return Status();
}

problem::ProblemShape shape_for(const TransportPlan& plan, int tokens) {
  problem::ProblemShape s;
  s.ranks = plan.preset.ranks;
  s.experts = static_cast<int>(plan.preset.preset->experts);
  s.top_k = static_cast<int>(plan.preset.preset->topk);
  s.hidden = plan.hidden;
  s.max_tokens = plan.max_tokens;
  s.nodes = plan.preset.layout;
  s.dtype = plan.dtype;
  s.tokens_per_rank = tokens;
  s.quantize = plan.quantize;
  return s;
}

// The slowest rank's bytes: algo from the reference byte account, physical from the transport's wire count.
dispatch::Traffic received(const TransportPlan& plan, TrafficOf traffic, const TransportWork& work,
                           int rank) {
  const dispatch::DispatchPlan& problem = work.problem().plan();
  const dispatch::ByteAccount account = dispatch::account_bytes(problem);
  // Expert-major moves one row per selection, like LL (docs/dispatch.md 5.3, 5.4); rank-major one per (r, t,
  // q).
  const bool per_selection = plan.layout != Layout::kHtRankMajor;
  const dispatch::Traffic d = (per_selection ? account.ll_dispatch : account.ht_dispatch)[rank].recv;
  const dispatch::Traffic c = (per_selection ? account.ll_combine : account.ht_combine)[rank].recv;
  dispatch::Traffic total;
  if (traffic.dispatch) total.algo += d.algo;
  if (traffic.combine) total.algo += c.algo;
  total.physical = work.wire_received(rank);
  return total;
}

// The ceiling of a point: the op's algo bytes between the same pairs, copied through shared memory or put
// through the fabric (plan.ceiling).
std::unique_ptr<MachineCeiling> make_ceiling(const TransportPlan& plan, TrafficOf traffic,
                                             const TransportWork& work) {
  const bool per_selection = plan.layout != Layout::kHtRankMajor;
  const dispatch::DispatchPlan* routing = &work.problem().plan();
  return make_machine_ceiling(
      plan.ceiling,
      [routing, per_selection, traffic]() -> Result<ByteMatrix> {
        return transport_bytes(*routing, per_selection, traffic);
      },
      plan.fabric, plan.seed, plan.timeout);
}

class TransportPoint final : public BenchPoint {
 public:
  TransportPoint(const TransportPlan& plan, TrafficOf traffic, std::unique_ptr<TransportWork> work,
                 std::unique_ptr<Measurement> measurement, int tokens)
      : plan_(plan),
        traffic_(traffic),
        work_(std::move(work)),
        measurement_(std::move(measurement)),
        ceiling_(make_ceiling(plan, traffic, *work_)),
        tokens_(tokens) {}

  std::vector<Measurement*> measurements() override {
    if (!ceiling_) return {measurement_.get()};
    return {measurement_.get(), ceiling_.get()};
  }

  std::string row(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const dispatch::Traffic t = received(plan_, traffic_, *work_, m.slowest_rank);
    std::vector<double> sorted = m.times_us;
    std::sort(sorted.begin(), sorted.end());
    TableRow row;
    row.tokens = tokens_;
    row.bytes = t.algo;
    row.p50_us = nearest_rank_percentile(sorted, 50);
    row.p99_us = nearest_rank_percentile(sorted, 99);
    row.algo_gbps = bandwidth_gbps(static_cast<double>(t.algo), row.p50_us);
    row.physical_gbps = bandwidth_gbps(static_cast<double>(t.physical), row.p50_us);
    row.slowest_rank = m.slowest_rank;
    if (m.check) row.wrong = m.check->mismatches;
    row.ceiling_us = ceiling_p50(measured);
    if (row.ceiling_us) {
      row.ceiling_gbps = bandwidth_gbps(static_cast<double>(t.algo), *row.ceiling_us);
      row.ceiling_ratio = ceiling_ratio(*row.ceiling_us, row.p50_us);
    }
    return BenchTable::row(row);
  }

  std::vector<CaseResult> cases(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const dispatch::Traffic t = received(plan_, traffic_, *work_, m.slowest_rank);
    CaseResult c;
    c.op = plan_.op;
    c.transport = std::string(work_->transport().name());
    c.mode = fmt::format("{}/{}", transport::layout_name(plan_.layout), combine_tree_name(plan_.tree));
    c.dtype = std::string(transport::dtype_name(plan_.dtype));
    c.sizes = {{"tokens", tokens_},
               {"ranks", mpi::size()},
               {"hidden", plan_.hidden},
               {"experts", plan_.preset.preset->experts},
               {"top_k", plan_.preset.preset->topk},
               {"max_tokens", plan_.max_tokens}};
    c.identity = work_->transport().identity();
    c.identity["device"] = plan_.device->properties().backend;
    c.identity["staging"] = std::string(work_->transport().staging());
    c.identity["workload"] = plan_.workload;
    c.identity["seed"] = std::to_string(plan_.seed);
    c.identity["preset"] = std::string(plan_.preset.preset->name);
    if (plan_.quantize) c.identity["quantize"] = std::string(quantize_name(plan_.quantize));
    c.times_us = m.times_us;
    c.algo_bytes = static_cast<double>(t.algo);
    c.physical_bytes = static_cast<double>(t.physical);
    c.slowest_rank = m.slowest_rank;
    c.check = m.check;
    if (const std::optional<double> us = ceiling_p50(measured)) c.ceiling = Ceiling{*us, ceiling_->kind()};
    return {c};
  }

 private:
  const TransportPlan& plan_;
  TrafficOf traffic_;
  std::unique_ptr<TransportWork> work_;
  std::unique_ptr<Measurement> measurement_;
  std::unique_ptr<MachineCeiling> ceiling_;  // null: not measured (TransportPlan::ceiling)
  int tokens_;
};

class TransportSeries final : public BenchSeries {
 public:
  TransportSeries(std::unique_ptr<transport::Transport> transport, std::shared_ptr<const TransportPlan> plan,
                  MeasurementFactory make, TrafficOf traffic, std::string params_block)
      : transport_(std::move(transport)),
        plan_holder_(std::move(plan)),
        plan_(*plan_holder_),
        make_(make),
        traffic_(traffic),
        params_block_(std::move(params_block)) {}

  std::string header() const override {
    const transport::Transport& t = *transport_;
    std::string out = fmt::format("# epsuite bench {} (epsuite {}, git {}) on {} ranks, {} node(s)\n",
                                  plan_.op, kSuiteVersion, kGitSha, mpi::size(), plan_.preset.nodes);
    out += fmt::format("#  {:<16} {}: {}\n", "transport", t.name(),
                       transport::transport_registry().find(t.name())->summary);
    if (t.describe() != t.name()) out += fmt::format("#  {:<16} {}\n", "path", t.describe());
    out += fmt::format("#  {:<16} {}, staging {}{}\n", "device", plan_.device->describe(), t.staging(),
                       plan_.device->host_accessible() ? ""
                                                       : "; buffers mirrored from the host around each call "
                                                         "(timings include the copies)");
    if (plan_.ranks_per_gpu > 1) {
      out += fmt::format(
          "#  {:<16} {} ranks share one GPU: it time-slices between their processes at every copy and "
          "kernel, "
          "which inflates these timings (one GPU per rank, or NVIDIA MPS, avoids it)\n",
          "warning", plan_.ranks_per_gpu);
    }
    const int proxy_cpus = 1 + plan_.fabric.proxy_threads;
    if (t.name() == "proxy" && plan_.fewest_cpus < proxy_cpus) {
      out += fmt::format(
          "#  {:<16} a rank may run on {} CPU(s) only (its affinity), but it and its {} proxy threads want "
          "{}: they take turns, which inflates these timings (mpirun --bind-to none, or --map-by "
          "...:PE={}, gives them their own; docs/channel.md)\n",
          "warning", plan_.fewest_cpus, plan_.fabric.proxy_threads, proxy_cpus, proxy_cpus);
    }
    out += fmt::format(
        "#  {:<16} {} dispatch, {} combine, {} payloads, H {}, T_max {}, workload {}, seed {}\n", "contract",
        transport::layout_name(plan_.layout), combine_tree_name(plan_.tree),
        transport::dtype_name(plan_.dtype), plan_.hidden, plan_.max_tokens, plan_.workload, plan_.seed);
    if (plan_.quantize) {
      out += fmt::format("#  {:<16} bf16 rows quantized by the dispatch, {} scales (docs/dispatch.md 5.8)\n",
                         "quantize", quantize_name(plan_.quantize));
    }
    out += fmt::format(
        "#  {:<16} MPI_Wtime per rank around the measured calls; barrier before each iteration; "
        "time = max over ranks\n",
        "timer");
    out += fmt::format(
        "#  {:<16} docs/dispatch.md 5.6 bytes received by the slowest rank (largest median); "
        "GB/s = bytes / p50\n",
        "bytes");
    out += ceiling_header_line(plan_.ceiling);
    return BenchTable(out + params_block_ + preset_header_block(plan_.preset)).header();
  }

  int num_points() const override { return static_cast<int>(plan_.preset.tokens.values.size()); }

  Result<std::unique_ptr<BenchPoint>> make_point(int index) override {
    const int tokens = static_cast<int>(plan_.preset.tokens.values[static_cast<std::size_t>(index)]);
    EPS_ASSIGN_OR_RETURN(problem::Problem problem,
                         problem::Problem::make(shape_for(plan_, tokens), plan_.workload, mpi::rank(),
                                                plan_.seed, 0, plan_.seed + kPayloadSeedOffset));
    auto work = std::make_unique<TransportWork>(*transport_, plan_, std::move(problem));
    // One untimed exchange first: the combine op needs its handle, every op a warm transport.
    EPS_RETURN_IF_ERROR(work->dispatch());
    work->compute_expert_outputs();
    std::unique_ptr<Measurement> measurement = make_(*work);
    return std::unique_ptr<BenchPoint>(
        std::make_unique<TransportPoint>(plan_, traffic_, std::move(work), std::move(measurement), tokens));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<const TransportPlan> plan_holder_;
  const TransportPlan& plan_;
  MeasurementFactory make_;
  TrafficOf traffic_;
  std::string params_block_;
};

Result<std::shared_ptr<TransportPlan>> make_plan(const BenchContext& context) {
  const Params& p = context.params;
  auto plan = std::make_shared<TransportPlan>();
  plan->op = context.op;
  plan->workload = p.string("workload");
  plan->seed = static_cast<std::uint64_t>(p.integer("seed"));
  plan->timeout = p.number("timeout");
  plan->fabric = fabric::fabric_selection_from(p);
  EPS_ASSIGN_OR_RETURN(mpi::NodeLayout nodes, mpi::node_layout(MPI_COMM_WORLD, Deadline(plan->timeout)));
  EPS_ASSIGN_OR_RETURN(plan->preset, resolve_preset_flags(p, nodes));
  EPS_ASSIGN_OR_RETURN(int local_rank, problem::node_local_rank(MPI_COMM_WORLD, plan->timeout));
  EPS_ASSIGN_OR_RETURN(plan->device, device::make_device(p.string("device"), local_rank));
  EPS_ASSIGN_OR_RETURN(plan->ranks_per_gpu,
                       problem::ranks_per_gpu(*plan->device, MPI_COMM_WORLD, plan->timeout));
  EPS_ASSIGN_OR_RETURN(const CpuCensus census, take_cpu_census(Deadline(plan->timeout)));
  plan->fewest_cpus = census.fewest_cpus_of_a_rank();
  EPS_RETURN_IF_ERROR(choose_contract(p, *plan));
  EPS_RETURN_IF_ERROR(check_workload(*plan));
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(plan->fabric));
  EPS_ASSIGN_OR_RETURN(plan->ceiling, choose_ceiling(p.string("ceiling"), nodes.nodes()));
  return plan;
}

}  // namespace

TransportWork::TransportWork(transport::Transport& transport, const TransportPlan& plan,
                             problem::Problem problem)
    : transport_(transport),
      plan_(plan),
      base_(std::move(problem)),
      buffers_(plan.layout, base_.shape()),
      out_(static_cast<std::size_t>(base_.plan().num_tokens(mpi::rank())) * plan.hidden) {}

Status TransportWork::use_payload_of(int iteration, bool checking) {
  if (!checking) return Status();
  current_.emplace(
      base_.with_payload(plan_.seed + kPayloadSeedOffset + 1 + static_cast<std::uint64_t>(iteration)));
  return Status();
}

void TransportWork::poison_dispatch_outputs() {
  buffers_ = problem::DispatchBuffers(plan_.layout, base_.shape());
}

void TransportWork::poison_combine_output() { std::fill(out_.begin(), out_.end(), bf16::from_bits(0x7fc1)); }

Status TransportWork::dispatch() {
  EPS_ASSIGN_OR_RETURN(handle_, transport_.dispatch(plan_.layout, problem().input(), buffers_.view()));
  return Status();
}

void TransportWork::compute_expert_outputs() {
  expert_y_ = problem::expert_outputs(base_.shape(), mpi::rank(), buffers_, handle_->num_recv_rows());
}

Status TransportWork::combine() {
  return transport_.combine(*handle_, {plan_.tree, expert_y_, {}, {}}, {out_, {}});
}

Status TransportWork::gather_wire(double timeout_seconds) {
  const std::int64_t received = transport_.wire_bytes().received - wire_start_.received;
  const std::string mine = std::to_string(received);
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> all,
                       mpi::allgather_string(mine, MPI_COMM_WORLD, Deadline(timeout_seconds), "wire bytes"));
  wire_received_.clear();
  for (const std::string& text : all) wire_received_.push_back(std::stoll(text));
  return Status();
}

Mismatches TransportWork::dispatch_mismatches() const {
  const dispatch::CompareReport report = problem::check_dispatch(
      problem(), mpi::rank(), buffers_, handle_->num_recv_rows(), transport_.capabilities().ll_ordered);
  return {report.mismatches(), report.ok() ? "" : report.to_string()};
}

Result<Mismatches> TransportWork::combine_mismatches() const {
  EPS_ASSIGN_OR_RETURN(dispatch::CompareReport report,
                       problem::check_combine(problem(), mpi::rank(), plan_.tree, false, out_, {}));
  return Mismatches{report.mismatches(), report.ok() ? "" : report.to_string()};
}

std::vector<ParamSpec> transport_op_params() {
  std::vector<ParamSpec> s = preset_param_specs();
  for (std::string_view name :
       {"transport", "device", "fabric", "signal", "chaos", "allow-unsafe", "iface", "proxy-threads"})
    s.push_back(param_spec(name));
  s.push_back(ceiling_param_spec());
  s.push_back({.name = "mode",
               .kind = ParamKind::kChoice,
               .default_text = "ht",
               .help = "ht: high-throughput layouts (docs/dispatch.md 5.2/5.3); ll: low-latency layout (5.4)",
               .choices = {"ht", "ll"}});
  s.push_back(
      {.name = "layout",
       .kind = ParamKind::kChoice,
       .default_text = "rank-major",
       .help = "HT layout: rank-major (ht-rank or ht-two-level combine) or expert-major (ll-weighted)",
       .choices = {"rank-major", "expert-major"}});
  s.push_back({.name = "dtype",
               .kind = ParamKind::kChoice,
               .default_text = "preset",
               .help = "Dispatch payload type; 'preset' = the preset's dispatch dtype",
               .choices = {"preset", "bf16", "fp8"}});
  s.push_back({.name = "quantize",
               .kind = ParamKind::kChoice,
               .default_text = "off",
               .help = "fp8 only: pass bf16 rows and let the dispatch quantize them with amax or round-scale "
                       "scales (docs/dispatch.md 5.8); off = pass fp8 codes and scales",
               .choices = {"off", "amax", "round-scale"}});
  s.push_back({.name = "hidden",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help = "Hidden size H; 0 = the preset's (fp8 needs a multiple of 128)",
               .int_min = 0,
               .int_max = 65536});
  s.push_back(
      {.name = "max-tokens",
       .kind = ParamKind::kInteger,
       .default_text = "0",
       .help = "T_max, the largest tokens per rank a call may pass (LL buffers); 0 = the largest swept count",
       .int_min = 0,
       .int_max = 65536});
  s.push_back({.name = "workload",
               .kind = ParamKind::kString,
               .default_text = "uniform",
               .help =
                   "Routing generator of docs/numerics.md 2.3 (uniform, zipf:S, hot:E,P, all-to-one, spread, "
                   "masked:P, ...)"});
  return s;
}

Result<std::vector<SeriesPlan>> plan_transport_op(const BenchContext& context, Json& config,
                                                  MeasurementFactory make, TrafficOf traffic) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<TransportPlan> plan, make_plan(context));
  const std::string& which = context.params.string("transport");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names, transport::select_transports(which));
  config["layout"] = transport::layout_name(plan->layout);
  config["tree"] = combine_tree_name(plan->tree);
  config["dtype"] = transport::dtype_name(plan->dtype);
  config["quantize"] = quantize_name(plan->quantize);
  config["hidden"] = plan->hidden;
  config["max_tokens"] = plan->max_tokens;
  config["timer"] = "MPI_Wtime";
  config["ceiling"] = plan->ceiling.empty() ? std::string("none") : plan->ceiling;
  config["preset_resolved"] = preset_to_json(plan->preset);
  const std::string params_block = context.params_block;
  std::vector<SeriesPlan> series;
  for (const std::string& name : names) {
    const problem::ProblemShape shape = shape_for(*plan, 0);
    series.push_back(
        {name,
         [plan, name, make, traffic, params_block, shape]() -> Result<std::unique_ptr<BenchSeries>> {
           transport::TransportConfig config = problem::transport_config(shape, plan->timeout);
           config.device = plan->device.get();
           config.memory = transport::MemoryKind::kDevice;
           EPS_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t,
                                transport::make_transport(name, config, plan->fabric));
           if (!plan->device->host_accessible())
             t = problem::mirror_through_device(std::move(t), *plan->device);
           return std::unique_ptr<BenchSeries>(
               std::make_unique<TransportSeries>(std::move(t), plan, make, traffic, params_block));
         },
         which != "all", helper_threads_per_rank(name, plan->fabric.proxy_threads)});
  }
  return series;
}

}  // namespace eps::bench
