// The flags of every bench op and their validation (house style rule 5: one definition per flag, in
// impls/runtime/params.hpp's catalog or here): each op's ParamSpecs, and the plan made from them once per
// run, before any series: the validated inputs, the device, the preset, and the op's part of the results
// document's `config` (docs/results.md 9.1). Errors are kInvalidArgument naming the flag (exit 2), found
// before anything runs or is written.
//
// Transport ops (dispatch, combine, roundtrip; perf/bench/transport_ops.hpp): --transport, the preset and
// shape flags, --mode ht with --layout rank-major (ht-rank combine, ht-two-level on several nodes) or
// expert-major (ll-weighted), --mode ll (ll-weighted), --dtype, --quantize (fp8 only, docs/dispatch.md 5.8),
// --hidden (fp8: a multiple of 128), --max-tokens (no swept count above it, docs/dispatch.md 5.4), --workload
// (docs/numerics.md 2.3), the fabric selection, --device and --ceiling (perf/bench/ceiling.hpp
// choose_ceiling). Layer (perf/bench/op_layer.cpp): the transport ops' flags less --workload, --hidden,
// --max-tokens and
// --quantize, plus --mask-ratio (r, r1,r2,... or a:b:step in [0, 1]), --schedule, --router, --routing and
// --layers.
// EPLB (perf/bench/op_eplb.cpp): the transport ops' flags less --hidden, --max-tokens, --layout and
// --quantize, plus --layers, --policy (all or a list, each once; greedy needs --slots = E when named),
// --steps (a multiple of
// --lb-interval), --lb-interval, --slots (a multiple of the ranks >= E; 0 = E + R), --replica-rule and
// --planner (HOST:PORT, with its key in EPSUITE_EPLB_KEY). --workload is required: drift (drift:STEPS with
// STEPS = 4 x --steps: the popular experts move a quarter turn over the run), hot (hot:0,0.5) or any
// docs/numerics.md 2.3 workload; -n and -w are refused (every step is timed once). --tokens takes one count.
// Fabric (perf/bench/op_fabric.cpp): --fabric, --chaos, --iface, --sizes (bytes, at most kMaxPutBytes) and
// --window.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/layer/eplb_runtime.hpp"
#include "impls/layer/layer_spec.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/transport/transport.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/presets.hpp"

namespace eps::bench {

// The validated flags of a transport op.
struct TransportPlan {
  std::string op;
  ResolvedPreset preset;
  transport::Layout layout = transport::Layout::kHtRankMajor;
  transport::CombineTree tree = transport::CombineTree::kHtRank;
  dispatch::PayloadType dtype = dispatch::PayloadType::kBf16;
  std::optional<Fp8ScaleMode> quantize;  // --quantize: bf16 rows quantized by the dispatch (fp8 only)
  int hidden = 0;
  int max_tokens = 0;
  std::string workload;
  std::uint64_t seed = 0;
  double timeout = kDefaultTimeoutSeconds;
  fabric::FabricSelection fabric;
  // --device: the transports take its memory (docs/devices.md). The bench's buffers are host vectors, which
  // are this device's memory when the host addresses it (`cpu`); for a GPU they are mirrored to the device
  // around each call (problem/device_mirror.hpp), so the timings include those copies (the header says so).
  std::shared_ptr<device::Device> device;
  int ranks_per_gpu = 1;  // problem::ranks_per_gpu: > 1 means the GPU time-slices between ranks (header)
  // The fewest CPUs any rank may run on (its affinity): the proxy transport's threads need their own
  // (header).
  int fewest_cpus = 1;
  // The ceiling every point measures next to the op (perf/bench/ceiling.hpp choose_ceiling: "shm-copy",
  // "fabric"), "" for none.
  std::string ceiling;
};

std::vector<ParamSpec> transport_op_params();
// The plan of a transport op; fills the op's `config`.
Result<std::shared_ptr<TransportPlan>> make_transport_plan(const BenchContext& context, Json& config);
// The problem shape of a point of `tokens` tokens per rank.
problem::ProblemShape shape_for(const TransportPlan& plan, int tokens);
std::string_view quantize_name(const std::optional<Fp8ScaleMode>& quantize);

// The validated flags of `bench layer`.
struct LayerPlan {
  ResolvedPreset preset;
  layer::LayerSpec base;  // everything but rank_tokens and mask_ratio
  std::vector<float> mask_ratios;
  std::string schedule;  // as used: "static", "linear_reverse", ... ("none" for token choice)
  std::string router;    // the preset's router name
  double timeout = kDefaultTimeoutSeconds;
  fabric::FabricSelection fabric;
  std::shared_ptr<device::Device> device;
  std::string ceiling;  // the ceiling each point times next to the op (ceiling.hpp choose_ceiling), "" none
  std::uint64_t seed = 0;
};

std::vector<ParamSpec> layer_params();
Result<std::shared_ptr<LayerPlan>> make_layer_plan(const BenchContext& context, Json& config);

// The validated flags of `bench eplb`.
struct EplbPlan {
  ResolvedPreset preset;
  layer::LayerSpec base;  // rank_tokens, routing workload, slots, replica rule and ranks_per_node set; step 0
  std::vector<std::string> policies;
  bool all_policies = false;
  int steps = 0;
  std::string workload;  // the workload's canonical text
  std::string router;    // "workload drift:32"
  layer::EplbConfig config;
  double timeout = kDefaultTimeoutSeconds;
  fabric::FabricSelection fabric;
  std::shared_ptr<device::Device> device;
};

std::vector<ParamSpec> eplb_params();
Result<std::shared_ptr<EplbPlan>> make_eplb_plan(const BenchContext& context, Json& config);
inline constexpr const char* kAllPolicies = "all";

// The validated flags of `bench fabric`.
struct FabricPlan {
  fabric::FabricSelection selection;
  std::vector<std::int64_t> sizes;
  int window = 0;
  std::uint64_t seed = 0;
  double timeout = kDefaultTimeoutSeconds;
  std::size_t region_bytes = 0;  // per region: max over sizes of slots * size
};

std::vector<ParamSpec> fabric_params();
Result<std::shared_ptr<FabricPlan>> make_fabric_plan(const BenchContext& context, Json& config);

}  // namespace eps::bench
