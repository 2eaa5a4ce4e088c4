// What the layer-stack ops (op_layer.cpp, op_eplb.cpp) share: the preset's stack as a LayerSpec, its router,
// the device, the header and base case of a stack on a transport, and small helpers of their settle().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/layer/layer_spec.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/params.hpp"
#include "impls/transport/transport.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/presets.hpp"
#include "reference/common/status.hpp"
#include "reference/routing/router.hpp"
#include "results/document.hpp"

namespace eps::bench {

// The router of the layer: the preset's, or with router_flag "tc" / "ec" its token-choice or expert-choice
// side (every preset names K, S and a k schedule; a token-choice preset routes EC with its S, k and
// schedule). schedule_flag "preset" takes the preset's schedule; `schedule_used` gets the schedule's name
// ("none" for token choice). Errors name --router / --schedule.
Result<routing::RouterConfig> preset_router(const ResolvedPreset& resolved, const std::string& router_flag,
                                            const std::string& schedule_flag, std::string& schedule_used);

// The preset's stack: seed, num_layers (`layers`, 0 = the preset's), H, F, E and the shared experts. Router,
// tokens, layout and dtype are the caller's.
layer::LayerSpec preset_stack(const ResolvedPreset& resolved, std::uint64_t seed, std::int64_t layers);

// The device of --device for this rank (a GPU per node-local rank). Collective.
Result<std::shared_ptr<device::Device>> open_bench_device(const Params& params, double timeout_seconds);

// The SeriesInfo of the stack `spec` on `transport` (docs/results.md 9.1): the node count, the echo of the
// transport (transport_echo), "layer" (layers, H, F, E, shared experts, router, schedule, S) and "contract"
// (layout, tree, dtype, top-k, seed), the preset's block as trailer, and the base case of `op`: mode
// "<layout>/<tree>", dtype, sizes {ranks, hidden, ffn, experts, top_k, shared, layers} and the identity of
// transport_series_case. The op adds its echo, table, sizes (tokens first) and identity.
SeriesInfo stack_series(const transport::Transport& transport, const device::Device& device,
                        const layer::LayerSpec& spec, const ResolvedPreset& resolved, std::string_view router,
                        std::string_view schedule, std::string op);

// --layers: MoE layers in the stack, 0 = the preset's.
ParamSpec layers_param_spec();

// This rank's value next to every other rank's, in rank order. Collective over MPI_COMM_WORLD.
Result<std::vector<std::int64_t>> gather_int64(std::int64_t mine, const Deadline& deadline,
                                               std::string_view what);

// The nearest-rank median (0 for none).
double median(std::vector<double> values);

}  // namespace eps::bench
