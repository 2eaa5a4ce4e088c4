#include "perf/bench/layer_setup.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "impls/device/device_registry.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/driver.hpp"
#include "results/document.hpp"

namespace eps::bench {

Result<routing::RouterConfig> preset_router(const ResolvedPreset& r, const std::string& router_flag,
                                            const std::string& schedule_flag, std::string& schedule_used) {
  const Preset& p = *r.preset;
  const bool expert_choice = router_flag == "preset" ? p.router == "ec" : router_flag == "ec";
  if (expert_choice && p.seq_len < 1) {
    return invalid_argument("--router", "preset {} has no sequence length S for expert choice", p.name);
  }
  if (!expert_choice) {
    routing::TokenChoiceConfig tc;
    tc.k = p.topk;
    tc.renorm = true;
    if (p.router == "tc-sigmoid-grouped") {
      tc.score = routing::ScoreFunction::kSigmoid;
      tc.groups = p.groups;
      tc.topk_groups = r.topk_groups;
    }
    schedule_used = "none";
    return routing::RouterConfig(tc);
  }
  routing::ExpertChoiceConfig ec;
  ec.k_schedule.k = p.topk;
  ec.k_schedule.k_min = p.k_min;
  ec.k_schedule.k_max = p.k_max;
  schedule_used = schedule_flag == "preset" ? std::string(p.k_schedule) : schedule_flag;
  EPS_ASSIGN_OR_RETURN(ec.k_schedule.schedule, routing::parse_schedule(schedule_used, "--schedule"));
  return routing::RouterConfig(ec);
}

layer::LayerSpec preset_stack(const ResolvedPreset& resolved, std::uint64_t seed, std::int64_t layers) {
  const Preset& preset = *resolved.preset;
  layer::LayerSpec spec;
  spec.seed = seed;
  spec.num_layers = static_cast<int>(layers > 0 ? layers : preset.layers);
  spec.hidden = static_cast<int>(preset.hidden);
  spec.ffn = static_cast<int>(preset.ffn);
  spec.num_experts = static_cast<int>(preset.experts);
  spec.num_shared = static_cast<int>(preset.shared_experts);
  spec.shared_ffn = static_cast<int>(preset.shared_ffn);
  return spec;
}

Result<std::shared_ptr<device::Device>> open_bench_device(const Params& params, double timeout_seconds) {
  EPS_ASSIGN_OR_RETURN(const int local_rank, problem::node_local_rank(MPI_COMM_WORLD, timeout_seconds));
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<device::Device> device,
                       device::make_device(params.string("device"), local_rank));
  return std::shared_ptr<device::Device>(std::move(device));
}

SeriesInfo stack_series(const transport::Transport& transport, const device::Device& device,
                        const layer::LayerSpec& s, const ResolvedPreset& resolved, std::string_view router,
                        std::string_view schedule, std::string op) {
  SeriesInfo info;
  info.nodes = resolved.nodes;
  info.echo = transport_echo(transport, device);
  info.echo.emplace_back(
      "layer",
      fmt::format("{} layers, H {}, F {}, E {}, shared {} x F {}, router {}, schedule {}, S {}", s.num_layers,
                  s.hidden, s.ffn, s.num_experts, s.num_shared, s.shared_ffn, router, schedule, s.seq_len));
  info.echo.emplace_back(
      "contract",
      fmt::format("{} dispatch, {} combine, {} payloads, top-k {}, seed {}", transport::layout_name(s.layout),
                  combine_tree_name(layer::layer_tree(s.layout)), transport::dtype_name(s.dtype),
                  layer::slot_width(s), s.seed));
  info.trailer = preset_header_block(resolved);
  info.base = transport_series_case(std::move(op), transport, device, s.seed, resolved.preset->name);
  info.base.mode =
      fmt::format("{}/{}", transport::layout_name(s.layout), combine_tree_name(layer::layer_tree(s.layout)));
  info.base.dtype = std::string(transport::dtype_name(s.dtype));
  info.base.sizes = {{"ranks", mpi::size()},
                     {"hidden", s.hidden},
                     {"ffn", s.ffn},
                     {"experts", s.num_experts},
                     {"top_k", layer::slot_width(s)},
                     {"shared", s.num_shared},
                     {"layers", s.num_layers}};
  return info;
}

ParamSpec layers_param_spec() {
  return {.name = "layers",
          .kind = ParamKind::kInteger,
          .default_text = "0",
          .help = "MoE layers in the stack; 0 = the preset's",
          .int_min = 0,
          .int_max = layer::kMaxLayers};
}

Result<std::vector<std::int64_t>> gather_int64(std::int64_t mine, const Deadline& deadline,
                                               std::string_view what) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(mpi::size()), 0);
  all[static_cast<std::size_t>(mpi::rank())] = mine;
  EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(all.data(), static_cast<int>(all.size()), MPI_INT64_T, MPI_SUM,
                                              MPI_COMM_WORLD, deadline, what));
  return all;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : nearest_rank_percentile(values, 50);
}

}  // namespace eps::bench
