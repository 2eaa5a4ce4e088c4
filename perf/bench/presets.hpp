// Standard configurations (docs/presets.md 11) as data.
//
// A `Preset` fixes the shapes of one published workload: tokens per rank (and the sweep a benchmark runs),
// hidden size H, top-k K (for expert choice the static k), routed experts E, expert FFN size F, shared
// experts and their FFN size, sequence length S (expert choice samples), MoE layers, the router, and the
// dispatch/combine dtypes. Values docs/presets.md 11 does not state are taken from the model's published
// configuration (named in presets.cpp) or chosen by the harness (also said there).
//
// `resolve_preset(name, ranks, ranks_per_node, tokens)` checks that the preset can run on `ranks` ranks
// and returns the derived values (local experts L = E / R, nodes, topk_groups = min(nodes, cap), the
// token sweep). Every refusal is kInvalidArgument (exit 2) with the reason:
//   unknown name      "--preset: unknown preset 'x'; valid: ht-deepseek-v3, ll-deepseek-v3, ..."
//   E % R != 0        "--preset ll-deepseek-v3: 256 experts cannot be split evenly over 3 ranks ..."
//   ranks_per_node    must divide the rank count (emulated nodes have equal sizes; real ones may differ)
//   fp8 and H % 128   docs/numerics.md 1.2
//   tokens            each swept count must fit the preset (EC: a multiple of S; 0 is allowed)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "impls/runtime/params.hpp"
#include "reference/common/status.hpp"
#include "reference/dispatch/node_layout.hpp"

namespace eps {

struct Preset {
  std::string_view name;
  std::string_view summary;
  std::string_view mode;  // "ht" (docs/dispatch.md 5.2/5.3), "ll" (docs/dispatch.md 5.4), "layer"
                          // (docs/layer.md 4.3), "all"
  std::int64_t tokens_per_rank;
  std::string_view tokens_sweep;  // parse_token_sweep text
  std::int64_t hidden;
  std::int64_t topk;  // token choice: K; expert choice: the static k of docs/routing.md 3.3/3.4
  std::int64_t experts;
  std::int64_t ffn;
  std::int64_t shared_experts;
  std::int64_t shared_ffn;
  std::int64_t
      seq_len;  // S: tokens per sample (expert choice capacity, docs/routing.md 3.3); 0 = token choice
  std::int64_t layers;
  std::string_view
      router;  // "tc-softmax", "tc-sigmoid-grouped" (docs/routing.md 3.1), "ec" (docs/routing.md 3.3)
  std::int64_t groups;           // expert groups of group-limited routing (1 = not grouped)
  std::int64_t topk_groups_cap;  // topk_groups = min(nodes, cap) when grouped
  std::string_view k_schedule;   // docs/routing.md 3.4 schedule compared with the static k ("static" = none)
  std::int64_t k_min;
  std::int64_t k_max;
  std::string_view dispatch_dtype;  // "bf16" or "fp8"
  std::string_view combine_dtype;   // "bf16"
};

std::span<const Preset> presets();
std::vector<std::string> preset_names();
Result<const Preset*> find_preset(std::string_view name);

struct ResolvedPreset {
  const Preset* preset = nullptr;
  int ranks = 1;
  NodeLayout layout;       // the nodes of two-level trees and group-limited routing (SPEC 14.2)
  int ranks_per_node = 1;  // layout.ranks_per_node(): 0 when the nodes differ in size
  int nodes = 1;
  std::int64_t local_experts = 0;  // L = E / R
  std::int64_t topk_groups = 1;
  TokenSweep tokens;            // the override if given, else the preset's sweep
  std::int64_t max_tokens = 0;  // T_max = largest swept count (docs/dispatch.md 5.4)
};

// ranks >= 1; ranks_per_node in [1, ranks] and dividing ranks (errors name --ranks-per-node): uniform nodes;
// `tokens` with no values = the preset's.
Result<ResolvedPreset> resolve_preset(std::string_view name, int ranks, int ranks_per_node,
                                      const TokenSweep& tokens);
// The same on the nodes of `layout` (any sizes; its ranks are the run's).
Result<ResolvedPreset> resolve_preset(std::string_view name, const NodeLayout& layout,
                                      const TokenSweep& tokens);

// The flags that choose and shape a preset: --preset, --tokens, --ranks-per-node.
std::vector<ParamSpec> preset_param_specs();

// resolve_preset with the flags of preset_param_specs(): --ranks-per-node 0 (the default) takes the nodes of
// the MPI shared-memory split (`real`, any sizes); a value > 0 emulates uniform nodes and is refused (exit 2,
// naming the flag and the node sizes found) when the real nodes differ in size (SPEC 14.2). Not
// collective: the caller passes the layout.
Result<ResolvedPreset> resolve_preset_flags(const Params& params, const NodeLayout& real);

// "#  preset           smoke: ..." lines and the JSON object of every field (config echo).
std::string preset_header_block(const ResolvedPreset& resolved);
Json preset_to_json(const ResolvedPreset& resolved);

}  // namespace eps
