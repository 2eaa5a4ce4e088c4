// `epsuite ref layer` (README "epsuite ref layer"): the single-process MoE layer reference of
// reference/layer/ (docs/layer.md 4.3) on a JSON document.
//
// Input (every field checked; unknown fields are errors):
//   {"seed": s, "layer": l, "hidden": H, "ffn": F, "num_experts": E, "shared_experts": n, "shared_ffn": Fs,
//    "seq_len": S, "num_samples": B, "router": {router object of harness/ref_route.hpp},
//    "mask_ratio": [B], "logits": "generated"|"gate", "combine": "ll-weighted"|"ht-rank",
//    "num_ranks": R, "expert_rank": [E], "kernel": "scalar"|"vectorized"}
// Output: "out" and "routed" as one string per token holding its H bf16 values as bit patterns, four
// lowercase hex digits each, concatenated (value h of token t = out[t][4h, 4h + 4)), the routing of
// `ref route` ("routing": tokens, k_per_sample, ..., compute_cost, static_cost) and the work done
// ("expert_rows", "experts_used", "shared_rows"), plus the kernel and combine tree used.
// Defaults and ranges are listed in README.md.
#pragma once

#include "impls/runtime/json_io.hpp"
#include "reference/layer/moe_layer.hpp"

namespace eps {

// Reads and validates the input document (every field above) without running the layer; checks that need
// the routing (mask ratios against the schedule) are made by run_moe_layer.
Result<MoeLayerConfig> parse_layer_config(const Json& input);

Result<Json> run_ref_layer(const Json& input);

}  // namespace eps
