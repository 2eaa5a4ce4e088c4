// `epsuite ref dispatch` (README "epsuite ref dispatch"): the dispatch references of reference/dispatch/ on a
// JSON document: the docs/dispatch.md 5.1 layout of every source rank and the receive METADATA every rank
// expects in the three layouts (5.2 rank-major, 5.3 expert-major, 5.4 LL), plus the 5.6 byte account.
// Payloads are not part of the input or the output.
//
// Input (every field checked; unknown fields anywhere are errors):
//   {"num_ranks": R, "num_experts": E, "top_k": K, "hidden": H, "dtype": "bf16"|"fp8",
//    "max_tokens_per_rank": T_max, "expert_alignment": a,
//    "ranks": [R x {"topk_idx": [T_r][K] ints, "topk_weights": [T_r][K] numbers or "nan"}],
//    "placement": {"phy2log": [P], "log2phy": [E][X]}}            (optional, one layer of docs/eplb.md 8.1)
// Output: the effective configuration and placement, "rank_prefix_matrix", "layout" [R] (per source rank),
// "ht_rank_major" [R], "ht_expert_major" [R], "ll" [R] (per receiving rank), "row_bytes" and "bytes" [R].
// Every expected value comes from reference/dispatch (DispatchPlan, expected_layout, rank_major_index,
// expert_major_index, ll_index, account_bytes); this file only reads and writes JSON. Defaults, ranges
// and the output fields are listed in README.md.
#pragma once

#include "impls/runtime/json_io.hpp"

namespace eps {

Result<Json> run_ref_dispatch(const Json& input);

}  // namespace eps
