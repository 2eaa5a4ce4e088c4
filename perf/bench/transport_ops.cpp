#include "perf/bench/transport_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "impls/device/device_registry.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/driver.hpp"
#include "perf/bench/oversubscription.hpp"
#include "perf/bench/table.hpp"
#include "reference/common/version.hpp"
#include "reference/data/workload.hpp"

namespace eps::bench {
namespace {

using transport::Layout;

constexpr std::uint64_t kPayloadSeedOffset = 1;

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

  std::vector<Measurement*> measurements() override { return {measurement_.get()}; }
  MachineCeiling* ceiling() override { return ceiling_.get(); }

  // Columns tokens, bytes, p50, p99, algo and physical GB/s (transport_table); one case.
  PointReport report(std::span<const Measured> measured) const override {
    const Measured& m = measured.front();
    const dispatch::Traffic t = received(plan_, traffic_, *work_, m.slowest_rank);
    const double p50 = percentile_us(m, 50);
    CaseParts c;
    c.sizes = {{"tokens", tokens_}};
    c.algo_bytes = static_cast<double>(t.algo);
    c.physical_bytes = static_cast<double>(t.physical);
    return {{std::int64_t{tokens_}, t.algo, p50, percentile_us(m, 99), bandwidth_gbps(c.algo_bytes, p50),
             bandwidth_gbps(c.physical_bytes, p50)},
            {c}};
  }

 private:
  const TransportPlan& plan_;
  TrafficOf traffic_;
  std::unique_ptr<TransportWork> work_;
  std::unique_ptr<Measurement> measurement_;
  std::unique_ptr<MachineCeiling> ceiling_;  // null: not measured (TransportPlan::ceiling)
  int tokens_;
};

// The warnings of the device line: buffers mirrored through the host, a GPU shared by ranks, proxy threads
// without CPUs of their own.
void add_warnings(const TransportPlan& plan, const transport::Transport& t, SeriesInfo& info) {
  if (plan.ranks_per_gpu > 1) {
    info.echo.emplace_back(
        "warning",
        fmt::format("{} ranks share one GPU: it time-slices between their processes at every copy and "
                    "kernel, which inflates these timings (one GPU per rank, or NVIDIA MPS, avoids it)",
                    plan.ranks_per_gpu));
  }
  const int proxy_cpus = 1 + plan.fabric.proxy_threads;
  if (t.name() == "proxy" && plan.fewest_cpus < proxy_cpus) {
    info.echo.emplace_back(
        "warning",
        fmt::format(
            "a rank may run on {} CPU(s) only (its affinity), but it and its {} proxy threads want {}: they "
            "take turns, which inflates these timings (mpirun --bind-to none, or --map-by ...:PE={}, "
            "gives them their own; docs/channel.md)",
            plan.fewest_cpus, plan.fabric.proxy_threads, proxy_cpus, proxy_cpus));
  }
}

class TransportSeries final : public BenchSeries {
 public:
  TransportSeries(std::unique_ptr<transport::Transport> transport, std::shared_ptr<const TransportPlan> plan,
                  MeasurementFactory make, TrafficOf traffic)
      : transport_(std::move(transport)),
        plan_holder_(std::move(plan)),
        plan_(*plan_holder_),
        make_(make),
        traffic_(traffic) {}

  SeriesInfo info() const override {
    const transport::Transport& t = *transport_;
    SeriesInfo info;
    info.nodes = plan_.preset.nodes;
    info.echo = transport_echo(
        t, *plan_.device,
        plan_.device->host_accessible()
            ? ""
            : "; buffers mirrored from the host around each call (timings include the copies)");
    add_warnings(plan_, t, info);
    info.echo.emplace_back(
        "contract", fmt::format("{} dispatch, {} combine, {} payloads, H {}, T_max {}, workload {}, seed {}",
                                transport::layout_name(plan_.layout), combine_tree_name(plan_.tree),
                                transport::dtype_name(plan_.dtype), plan_.hidden, plan_.max_tokens,
                                plan_.workload, plan_.seed));
    if (plan_.quantize) {
      info.echo.emplace_back(
          "quantize", fmt::format("bf16 rows quantized by the dispatch, {} scales (docs/dispatch.md 5.8)",
                                  quantize_name(plan_.quantize)));
    }
    info.echo.emplace_back(
        "timer",
        "MPI_Wtime per rank around the measured calls; barrier before each iteration; time = max over ranks");
    info.echo.emplace_back(
        "bytes",
        "docs/dispatch.md 5.6 bytes received by the slowest rank (largest median); GB/s = bytes / p50");
    info.echo.push_back(ceiling_echo(plan_.ceiling));
    info.trailer = preset_header_block(plan_.preset);
    info.table = transport_table();
    info.base = transport_series_case(plan_.op, t, *plan_.device, plan_.seed, plan_.preset.preset->name);
    info.base.mode =
        fmt::format("{}/{}", transport::layout_name(plan_.layout), combine_tree_name(plan_.tree));
    info.base.dtype = std::string(transport::dtype_name(plan_.dtype));
    info.base.sizes = {{"ranks", mpi::size()},
                       {"hidden", plan_.hidden},
                       {"experts", plan_.preset.preset->experts},
                       {"top_k", plan_.preset.preset->topk},
                       {"max_tokens", plan_.max_tokens}};
    info.base.identity["workload"] = plan_.workload;
    if (plan_.quantize) info.base.identity["quantize"] = std::string(quantize_name(plan_.quantize));
    return info;
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
};

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
  const dispatch::MismatchReport report =
      problem::check_dispatch(problem(), mpi::rank(), buffers_, handle_->num_recv_rows(),
                              transport_.capabilities().fixed_order(plan_.layout));
  return {report.mismatches(), report.ok() ? "" : report.to_string()};
}

Result<Mismatches> TransportWork::combine_mismatches() const {
  EPS_ASSIGN_OR_RETURN(dispatch::MismatchReport report,
                       problem::check_combine(problem(), mpi::rank(), plan_.tree, false, out_, {}));
  return Mismatches{report.mismatches(), report.ok() ? "" : report.to_string()};
}

Result<std::vector<SeriesPlan>> plan_transport_op(const BenchContext& context, Json& config,
                                                  MeasurementFactory make, TrafficOf traffic) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<TransportPlan> plan, make_transport_plan(context, config));
  return one_series_per_transport(
      context.params, plan->fabric,
      [plan, make, traffic](const std::string& name) -> Result<std::unique_ptr<BenchSeries>> {
        transport::TransportConfig config = problem::transport_config(shape_for(*plan, 0), plan->timeout);
        config.device = plan->device.get();
        config.memory = transport::MemoryKind::kDevice;
        EPS_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t,
                             transport::make_transport(name, config, plan->fabric));
        if (!plan->device->host_accessible()) t = problem::mirror_through_device(std::move(t), *plan->device);
        return std::unique_ptr<BenchSeries>(
            std::make_unique<TransportSeries>(std::move(t), plan, make, traffic));
      });
}

Result<std::vector<SeriesPlan>> one_series_per_transport(const Params& params,
                                                         const fabric::FabricSelection& fabric,
                                                         const TransportSeriesFactory& make) {
  const std::string& which = params.string("transport");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names, transport::select_transports(which));
  std::vector<SeriesPlan> series;
  for (const std::string& name : names) {
    series.push_back({name, [make, name] { return make(name); }, which != "all",
                      helper_threads_per_rank(name, fabric.proxy_threads)});
  }
  return series;
}

}  // namespace eps::bench
