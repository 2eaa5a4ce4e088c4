#include "perf/bench/bench_flags.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "impls/device/device_registry.hpp"
#include "impls/layer/planner/planner.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/ceiling.hpp"
#include "perf/bench/fabric_engine.hpp"
#include "perf/bench/layer_setup.hpp"
#include "perf/bench/oversubscription.hpp"
#include "reference/data/values.hpp"
#include "reference/data/workload.hpp"
#include "reference/eplb/policy.hpp"

namespace eps::bench {
namespace {

using layer::LayerSpec;
using transport::CombineTree;
using transport::Layout;

constexpr int kMaxSteps = static_cast<int>(data::kMaxStep) + 1;
constexpr const char* kHotWorkload = "hot:0,0.5";

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

}  // namespace

std::string_view quantize_name(const std::optional<Fp8ScaleMode>& quantize) {
  if (!quantize) return "off";
  return *quantize == Fp8ScaleMode::kRoundScale ? "round-scale" : "amax";
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

std::vector<ParamSpec> transport_op_params() {
  std::vector<ParamSpec> s = preset_param_specs();
  for (std::string_view name : {"transport", "device", "fabric", "signal", "chaos", "allow-unsafe", "iface",
                                "proxy-threads", "allow-fallback", "require-fabric"})
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

Result<std::shared_ptr<TransportPlan>> make_transport_plan(const BenchContext& context, Json& config) {
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
  config["layout"] = transport::layout_name(plan->layout);
  config["tree"] = combine_tree_name(plan->tree);
  config["dtype"] = transport::dtype_name(plan->dtype);
  config["quantize"] = quantize_name(plan->quantize);
  config["hidden"] = plan->hidden;
  config["max_tokens"] = plan->max_tokens;
  config["timer"] = "MPI_Wtime";
  config["ceiling"] = plan->ceiling.empty() ? std::string("none") : plan->ceiling;
  config["preset_resolved"] = preset_to_json(plan->preset);
  return plan;
}

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

Result<std::shared_ptr<LayerPlan>> make_layer_plan(const BenchContext& context, Json& config) {
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
  config["layout"] = transport::layout_name(spec.layout);
  config["tree"] = combine_tree_name(layer::layer_tree(spec.layout));
  config["dtype"] = transport::dtype_name(spec.dtype);
  config["layers"] = spec.num_layers;
  config["schedule_used"] = plan->schedule;
  config["mask_ratios"] = plan->mask_ratios;
  config["timer"] = "MPI_Wtime";
  config["ceiling"] = plan->ceiling.empty() ? std::string("none") : plan->ceiling;
  config["preset_resolved"] = preset_to_json(plan->preset);
  return plan;
}

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

Result<std::shared_ptr<EplbPlan>> make_eplb_plan(const BenchContext& context, Json& config) {
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

  layer::EplbConfig& eplb = plan->config;
  eplb.lb_interval = interval;
  eplb.num_groups = static_cast<int>(preset.groups);
  eplb.timeout_seconds = plan->timeout;
  eplb.planner_address = p.string("planner");
  if (!eplb.planner_address.empty()) {
    EPS_RETURN_IF_ERROR(planner::parse_address("--planner", eplb.planner_address).status());
    if (std::getenv(std::string(planner::kKeyVariable).c_str()) == nullptr) {
      return invalid_argument("--planner", "talking to a planner process needs its key in {}",
                              planner::kKeyVariable);
    }
  }
  EPS_ASSIGN_OR_RETURN(plan->device, open_bench_device(p, plan->timeout));
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
  return plan;
}

std::vector<ParamSpec> fabric_params() {
  std::vector<ParamSpec> s;
  for (std::string_view name : {"fabric", "chaos", "iface", "allow-fallback", "require-fabric"})
    s.push_back(param_spec(name));
  s.push_back({.name = "sizes",
               .kind = ParamKind::kSweep,
               .default_text = "8:2097152:x4",
               .help = "bench fabric: message sizes in bytes, a:b:xF, a:b:+S or a list",
               .int_min = 1,
               .int_max = static_cast<std::int64_t>(fabric::kMaxPutBytes)});
  s.push_back({.name = "window",
               .kind = ParamKind::kInteger,
               .default_text = "64",
               .help = "bench fabric: puts posted back to back per bandwidth iteration",
               .int_min = 1,
               .int_max = 65536});
  return s;
}

Result<std::shared_ptr<FabricPlan>> make_fabric_plan(const BenchContext& context, Json& config) {
  const Params& p = context.params;
  auto plan = std::make_shared<FabricPlan>();
  plan->selection = fabric::fabric_selection_from(p);
  plan->sizes = p.sweep("sizes").values;
  plan->window = static_cast<int>(p.integer("window"));
  plan->seed = static_cast<std::uint64_t>(p.integer("seed"));
  plan->timeout = p.number("timeout");
  if (plan->sizes.empty()) return invalid_argument("--sizes", "needs at least one message size");
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(plan->selection));
  for (std::int64_t s : plan->sizes) {
    const auto bytes = static_cast<std::size_t>(s);
    plan->region_bytes =
        std::max(plan->region_bytes, bench_fabric::window_slots(bytes, plan->window) * bytes);
  }
  config["region_bytes"] = plan->region_bytes;
  config["timer"] = "MPI_Wtime";
  return plan;
}

}  // namespace eps::bench
