// `epsuite ref route` (README "epsuite ref route"): the routing references of reference/routing/ on a
// JSON document. Also the JSON router parser for every tool that takes a router object (e.g. the MoE
// layer tool), so that one schema with one set of defaults and ranges describes a router everywhere.
//
// Router object (`path` is its field path, "router" in `ref route`; every error names "path.field"):
//   {"type": "tc", "k": K, "score": "softmax"|"sigmoid", "renorm": bool, "bias": [E], "groups": G,
//    "topk_groups": g, "scaling": s, "capacity": "dropless"|"megatron"|"gshard", "cf": cf,
//    "drop": "position"|"probs"}
//   {"type": "ec"|"ec-softmax", "k": k, "scope": "sequence"|"batch", "gate": "softmax"|"sigmoid" (ec only),
//    "schedule": name, "k_min": a, "k_max": b, "sigma": σ, "fscale": [E + 1] (ec only)}
// Defaults and ranges are listed in README.md. Fields that the chosen type or options do not use (a typo,
// or e.g. "cf" with "capacity": "dropless") are errors, not silently ignored.
#pragma once

#include <cstdint>
#include <string>

#include "impls/runtime/json_io.hpp"
#include "reference/routing/router.hpp"

namespace eps {

// Parses and validates a router object for `num_experts` experts.
Result<routing::RouterConfig> parse_router_json(const Json& router, std::int64_t num_experts,
                                                const std::string& path = "router");

// The output document of `ref route` for one routing (README schema).
Json routing_to_json(const routing::Routing& routing);

// The `route` tool: {"router", "seq_len", "logits", "mask_ratio"} -> routing_to_json.
Result<Json> run_ref_route(const Json& input);

}  // namespace eps
