#include "perf/bench/presets.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace eps {
namespace {

// docs/presets.md 11 gives tokens, H, K, E (and F, shared experts, S, schedules for EC-DLM). The rest:
// - DeepSeek-V3 (config.json of deepseek-ai/DeepSeek-V3): F (moe_intermediate_size) 2048, 1 shared
//   expert, 8 expert groups, topk_group 4, sigmoid scores, 58 MoE layers (61 layers, first 3 dense).
// - DeepSeek-V2-Lite (pplx-kernels' test model): F 1408, 2 shared experts, softmax scores without groups,
//   26 MoE layers (27 layers, first dense). docs/presets.md 11 names no dtype: bf16 both ways.
// - EC-DLM: tokens per rank are not in docs/presets.md 11; the harness uses 4 samples of S per rank
//   (owt 4 x 512, 8b 2 x 2048) and sweeps powers of two in whole samples. ec-dlm-8b states no layer count:
//   one layer is measured. Dispatch bf16 (docs/presets.md 11 names no fp8 for these models).
// - smoke: the same structure at a size where the whole suite runs in minutes on 2 cores with 4
//   oversubscribed ranks. E = 24 divides every rank count ctest uses (1, 2, 3, 4, 6, 8: docs/dispatch.md 5.7
//   wants non-powers of two), giving L = 6 at R = 4; H = 256 is the smallest multiple of 128 (fp8,
//   docs/numerics.md 1.2) with two fp8 scale groups; K = 4 over 4 groups of 6 experts keeps group-limited
//   routing meaningful; tokens 64..256 with S = 64 give 1..4 EC samples per rank. Cost at the largest point:
//   a dispatch moves at most 256 x 4 rows x 256 B (fp8) = 256 KiB per rank; the reference expert pass is 256
//   x 4 x 3 x 256 x 128 = 101 M multiply-adds per rank and layer (~0.1-0.2 s scalar), 2 layers.
// - ec-dlm-owt-smoke, ec-dlm-8b-smoke: the EC-DLM presets' structure (router, schedule and k range, two
// shared
//   experts, layers of owt cut to 4) at the smoke scale: E = 48 and 24 divide every ctest rank count, S 64
//   and 128 give 1..4 samples per rank, H and F a quarter or less of the models'. k keeps the models' values,
//   so each token still visits ~k experts (owt: k 20 of 48).
// DeepSeek-V3's shapes; the HT and LL presets differ only in their tokens and mode.
constexpr Preset deepseek_v3(std::string_view name, std::string_view summary, std::string_view mode,
                             std::int64_t tokens, std::string_view sweep) {
  return {name, summary,  mode, tokens, sweep, 7168,  8, 256, 2048, 1, 2048, 0, 58, "tc-sigmoid-grouped", 8,
          4,    "static", 8,    8,      "fp8", "bf16"};
}

constexpr std::array<Preset, 8> kPresets = {{
    deepseek_v3("ht-deepseek-v3", "DeepEP high-throughput dispatch/combine at DeepSeek-V3 shapes", "ht", 4096,
                "4096"),
    deepseek_v3("ll-deepseek-v3",
                "DeepEP low-latency dispatch/combine at DeepSeek-V3 shapes (DeepEP's test: E 288)", "ll", 128,
                "1:256:x2"),
    {"pplx-v2lite",
     "pplx-kernels all-to-all at DeepSeek-V2-Lite shapes",
     "ll",
     128,
     "1:128:x2",
     2048,
     6,
     64,
     1408,
     2,
     1408,
     0,
     26,
     "tc-softmax",
     1,
     1,
     "static",
     6,
     6,
     "bf16",
     "bf16"},
    {"ec-dlm-owt",
     "EC-DLM MoE layer, OpenWebText model (expert choice, k 20 vs linear_reverse 8..32)",
     "layer",
     2048,
     "512:4096:x2",
     512,
     20,
     512,
     384,
     2,
     768,
     512,
     16,
     "ec",
     1,
     1,
     "linear_reverse",
     8,
     32,
     "bf16",
     "bf16"},
    {"ec-dlm-8b",
     "EC-DLM MoE layer, 8B model (expert choice, static 8 vs linear_reverse 2..14)",
     "layer",
     4096,
     "2048:8192:x2",
     2048,
     8,
     64,
     1280,
     2,
     2560,
     2048,
     1,
     "ec",
     1,
     1,
     "linear_reverse",
     2,
     14,
     "bf16",
     "bf16"},
    {"smoke",
     "every shape of the suite scaled down for a 2-core machine with 4 ranks",
     "all",
     128,
     "64:256:x2",
     256,
     4,
     24,
     128,
     1,
     256,
     64,
     2,
     "tc-sigmoid-grouped",
     4,
     4,
     "linear_reverse",
     2,
     6,
     "fp8",
     "bf16"},
    {"ec-dlm-owt-smoke",
     "ec-dlm-owt shrunk for a 2-core machine (expert choice, k 20 vs linear_reverse 8..32)",
     "layer",
     128,
     "64:256:x2",
     128,
     20,
     48,
     96,
     2,
     192,
     64,
     4,
     "ec",
     1,
     1,
     "linear_reverse",
     8,
     32,
     "bf16",
     "bf16"},
    {"ec-dlm-8b-smoke",
     "ec-dlm-8b shrunk for a 2-core machine (expert choice, static 8 vs linear_reverse 2..14)",
     "layer",
     256,
     "128:512:x2",
     256,
     8,
     24,
     160,
     2,
     320,
     128,
     1,
     "ec",
     1,
     1,
     "linear_reverse",
     2,
     14,
     "bf16",
     "bf16"},
}};

bool is_expert_choice(const Preset& p) { return p.router == "ec"; }

Status check_shapes(const Preset& p, int ranks, std::int64_t topk_groups) {
  const std::string field = fmt::format("--preset {}", p.name);
  if (p.experts % ranks != 0) {
    return invalid_argument(field,
                            "{} experts cannot be split evenly over {} ranks (E % R = {}); use a rank count "
                            "that divides {}",
                            p.experts, ranks, p.experts % ranks, p.experts);
  }
  if (p.dispatch_dtype == "fp8" && p.hidden % 128 != 0) {
    return invalid_argument(
        field, "hidden {} is not a multiple of 128, required for fp8 (docs/numerics.md 1.2)", p.hidden);
  }
  const std::int64_t reachable = topk_groups * (p.experts / p.groups);
  if (!is_expert_choice(p) && p.topk > reachable) {
    return invalid_argument(field, "top-k {} exceeds the {} experts of the {} groups kept on {} ranks",
                            p.topk, reachable, topk_groups, ranks);
  }
  return Status();
}

Status check_tokens(const Preset& p, const TokenSweep& tokens) {
  for (std::int64_t t : tokens.values) {
    if (is_expert_choice(p) || p.mode == "all") {
      if (t % p.seq_len != 0) {
        return invalid_argument("--tokens", "{} is not a multiple of the sequence length S = {} of preset {}",
                                t, p.seq_len, p.name);
      }
    }
  }
  return Status();
}

}  // namespace

std::span<const Preset> presets() { return kPresets; }

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

Result<const Preset*> find_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name == name) return &p;
  }
  return invalid_argument("--preset", "unknown preset '{}'; valid: {}", name,
                          fmt::join(preset_names(), ", "));
}

Result<ResolvedPreset> resolve_preset(std::string_view name, int ranks, int ranks_per_node,
                                      const TokenSweep& tokens) {
  if (ranks < 1) return out_of_range("ranks", 1, 1 << 20, ranks);
  if (ranks_per_node < 1 || ranks_per_node > ranks)
    return out_of_range("--ranks-per-node", 1, ranks, ranks_per_node);
  if (ranks % ranks_per_node != 0) {
    return invalid_argument("--ranks-per-node", "must divide the rank count {}, got {}", ranks,
                            ranks_per_node);
  }
  return resolve_preset(name, value_or_throw(NodeLayout::uniform(ranks, ranks_per_node)), tokens);
}

Result<ResolvedPreset> resolve_preset(std::string_view name, const NodeLayout& layout,
                                      const TokenSweep& tokens) {
  EPS_ASSIGN_OR_RETURN(const Preset* p, find_preset(name));
  const int ranks = layout.ranks();
  if (ranks < 1) return out_of_range("ranks", 1, 1 << 20, ranks);
  EPS_RETURN_IF_ERROR(layout.check(ranks));
  ResolvedPreset r;
  r.preset = p;
  r.ranks = ranks;
  r.layout = layout;
  r.ranks_per_node = layout.ranks_per_node();
  r.nodes = layout.nodes();
  r.local_experts = p->experts / ranks;
  r.topk_groups = p->groups > 1 ? std::min<std::int64_t>(r.nodes, p->topk_groups_cap) : 1;
  EPS_RETURN_IF_ERROR(check_shapes(*p, ranks, r.topk_groups));
  if (tokens.values.empty()) {
    EPS_ASSIGN_OR_RETURN(r.tokens, parse_token_sweep(p->tokens_sweep, "preset tokens", 0, 1 << 20));
  } else {
    r.tokens = tokens;
  }
  EPS_RETURN_IF_ERROR(check_tokens(*p, r.tokens));
  r.max_tokens = *std::max_element(r.tokens.values.begin(), r.tokens.values.end());
  return r;
}

std::vector<ParamSpec> preset_param_specs() {
  std::vector<ParamSpec> c;
  c.push_back({.name = "preset",
               .kind = ParamKind::kChoice,
               .default_text = "smoke",
               .help = "Standard configuration (docs/presets.md 11)",
               .choices = preset_names()});
  c.push_back({.name = "tokens",
               .kind = ParamKind::kSweep,
               .default_text = "",
               .help = "Tokens per rank: a:b:xF (geometric), a:b:+S (arithmetic), a list 1,2,4 or one value; "
                       "unset = the preset's sweep",
               .int_min = 0,
               .int_max = 65536});
  c.push_back({.name = "ranks-per-node",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help =
                   "Ranks per node of two-level trees and group-limited routing; 0 = the nodes of the MPI "
                   "shared-memory split, of any sizes (set it to emulate uniform nodes; refused when the "
                   "real nodes differ in size)",
               .int_min = 0,
               .int_max = 65536});
  return c;
}

Result<ResolvedPreset> resolve_preset_flags(const Params& params, const NodeLayout& real) {
  const std::int64_t per_node = params.integer("ranks-per-node");
  if (per_node == 0) return resolve_preset(params.string("preset"), real, params.sweep("tokens"));
  // SPEC 14.2: the override emulates uniform nodes; it cannot describe (or hide) a real uneven layout.
  if (real.ranks_per_node() == 0) {
    return invalid_argument("--ranks-per-node",
                            "is an override for uniform layouts only; the nodes of this run hold {} ranks "
                            "(leave it unset: every command takes nodes of different sizes)",
                            real.sizes_text());
  }
  return resolve_preset(params.string("preset"), real.ranks(), static_cast<int>(per_node),
                        params.sweep("tokens"));
}

std::string preset_header_block(const ResolvedPreset& r) {
  const Preset& p = *r.preset;
  std::string out;
  out += fmt::format("#  workload         {} ({}): {}\n", p.name, p.mode, p.summary);
  out += fmt::format(
      "#  shapes           tokens/rank {} (sweep {}), H {}, K {}, E {} (L {} on {} ranks, {} node(s){})\n",
      p.tokens_per_rank, fmt::join(r.tokens.values, ","), p.hidden, p.topk, p.experts, r.local_experts,
      r.ranks, r.nodes, r.ranks_per_node == 0 ? fmt::format(" of {} ranks", r.layout.sizes_text()) : "");
  out += fmt::format("#  experts          F {}, shared {} x F {}, S {}, layers {}\n", p.ffn, p.shared_experts,
                     p.shared_ffn, p.seq_len, p.layers);
  out += fmt::format("#  routing          {} (groups {}, topk_groups {}), k schedule {} {}..{}\n", p.router,
                     p.groups, r.topk_groups, p.k_schedule, p.k_min, p.k_max);
  out += fmt::format("#  dtypes           dispatch {}, combine {}\n", p.dispatch_dtype, p.combine_dtype);
  return out;
}

Json preset_to_json(const ResolvedPreset& r) {
  const Preset& p = *r.preset;
  return Json{{"name", p.name},
              {"mode", p.mode},
              {"tokens_per_rank", p.tokens_per_rank},
              {"tokens", r.tokens.values},
              {"max_tokens", r.max_tokens},
              {"hidden", p.hidden},
              {"topk", p.topk},
              {"experts", p.experts},
              {"local_experts", r.local_experts},
              {"ffn", p.ffn},
              {"shared_experts", p.shared_experts},
              {"shared_ffn", p.shared_ffn},
              {"seq_len", p.seq_len},
              {"layers", p.layers},
              {"router", p.router},
              {"groups", p.groups},
              {"topk_groups", r.topk_groups},
              {"k_schedule", p.k_schedule},
              {"k_min", p.k_min},
              {"k_max", p.k_max},
              {"dispatch_dtype", p.dispatch_dtype},
              {"combine_dtype", p.combine_dtype},
              {"ranks", r.ranks},
              {"ranks_per_node", r.ranks_per_node},
              {"nodes", r.nodes},
              {"node_sizes", r.layout.node_sizes}};
}

}  // namespace eps
