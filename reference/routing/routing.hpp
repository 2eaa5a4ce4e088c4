// The input and output of every router (docs/routing.md 3): `logits (fp32, [T, E]) -> (selection, gates)`.
//
// Input: `RoutingInput` holds row-major logits [T, E] of T = B·S tokens, sample-major (token i belongs to
// sample i / S), the sequence length S and, for step-dependent capacity (docs/routing.md 3.4), one mask ratio
// per sample. `validate_routing_input` checks it once for every router:
//   - T >= 1, E >= 1, logits.size() == T·E                      ("logits: ...")
//   - no NaN  -> "logits[t][e]: NaN is not allowed" (docs/numerics.md 1.3); no +inf -> "logits[t][e]: +inf is
//   not
//     allowed" (+inf would make the max-subtracted softmax NaN); -inf is allowed and sorts last
//   - S in [1, T] and T a multiple of S                          ("seq_len: ...")
//   - mask_ratio empty or of size B, every value in [0, 1]       ("mask_ratio[b]: ...")
//
// Output: `Routing`, per token its slots in docs/layer.md 4.3 slot order (token choice: router order, i.e.
// the canonical order of the selection key, with a dropped slot kept in place as expert -1 / gate 0; expert
// choice: ascending expert id, only the experts that picked the token) as CSR arrays, plus the statistics
// every consumer reports (docs/routing.md 3.2-3.4). `to_fixed_topk` converts it to the fixed [T, width]
// topk_idx / topk_weights form that dispatch takes (docs/dispatch.md 5), padded with -1 / 0.0f.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::routing {

struct RoutingInput {
  std::span<const float> logits;      // row-major [num_tokens, num_experts]
  std::int64_t num_tokens = 0;        // T = B·S
  std::int64_t num_experts = 0;       // E
  std::int64_t seq_len = 0;           // S; T must be a multiple of it
  std::span<const float> mask_ratio;  // [B] r_b in [0, 1] (docs/routing.md 3.4), or empty

  std::int64_t num_samples() const { return seq_len > 0 ? num_tokens / seq_len : 0; }
  float logit(std::int64_t t, std::int64_t e) const { return logits[t * num_experts + e]; }
  std::span<const float> row(std::int64_t t) const {
    return logits.subspan(static_cast<std::size_t>(t * num_experts), static_cast<std::size_t>(num_experts));
  }
};

Status validate_routing_input(const RoutingInput& input);

struct Routing {
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  std::int64_t seq_len = 0;

  // CSR: token t's slots are [slot_begin[t], slot_begin[t + 1]) of slot_expert / slot_gate.
  std::vector<std::int64_t> slot_begin;   // [T + 1]
  std::vector<std::int32_t> slot_expert;  // expert id, -1 for a dropped token-choice slot
  std::vector<float> slot_gate;  // final slot weight (docs/layer.md 4.3 `w`); 0.0f for a dropped slot

  std::vector<std::int64_t> k_per_sample;  // [B]: k_b (token choice: K for every sample)
  // Expert choice, sequence scope: c_b per sample ([B]); empty for the other routers.
  std::vector<std::int64_t> capacity_per_sample;
  // Per-expert capacity over the whole batch: token choice C (nullopt when dropless); expert choice
  // batch scope c; nullopt for expert choice sequence scope.
  std::optional<std::int64_t> capacity;

  std::vector<std::int64_t> expert_load;  // [E] kept assignments per expert
  std::int64_t dropped_tokens = 0;        // tokens with no kept slot
  std::int64_t dropped_assignments = 0;   // token choice: dropped (token, slot) pairs; expert choice 0
  // Token choice: dropped_assignments / (T·K); expert choice: dropped_tokens / T.
  double drop_ratio = 0.0;
  // (E·C_total − kept) / (E·C_total) with C_total = C (token choice), Σ_b c_b or c (expert choice);
  // nullopt when dropless or E·C_total = 0.
  std::optional<double> padding_waste;
  std::int64_t compute_cost = 0;  // Σ_b S·k_b (docs/routing.md 3.4)
  std::int64_t static_cost = 0;   // B·S·k with the router's static k (token choice: K)

  std::int64_t num_samples() const { return seq_len > 0 ? num_tokens / seq_len : 0; }
  std::int64_t num_slots(std::int64_t t) const { return slot_begin[t + 1] - slot_begin[t]; }
  std::span<const std::int32_t> experts(std::int64_t t) const {
    return std::span<const std::int32_t>(slot_expert).subspan(slot_begin[t], num_slots(t));
  }
  std::span<const float> gates(std::int64_t t) const {
    return std::span<const float>(slot_gate).subspan(slot_begin[t], num_slots(t));
  }
};

// Joins the routings of consecutive token ranges, each routed on its own with the same E and S (a
// distributed layer routes every rank's tokens where they live, docs/layer.md 4.4), into the routing of all
// their tokens: CSR arrays, k_per_sample and capacity_per_sample concatenated in part order; expert_load,
// dropped_tokens, dropped_assignments, compute_cost and static_cost summed; `capacity` the sum of the parts'
// capacities (each part's experts hold that many, so the whole batch holds the sum; nullopt when any part
// has none); drop_ratio the token-weighted mean of the parts' ratios (each is a count over T_part·K or
// T_part); padding_waste (E·C_total − kept) / (E·C_total) with C_total = `capacity` or, for sequence scope,
// Σ capacity_per_sample (nullopt when dropless or E·C_total = 0). Parts with no token are allowed and
// contribute nothing. Errors: parts with different E or S; no part at all.
Result<Routing> join_routings(std::span<const Routing> parts);

// A routing given as fixed top-k slots (a recorded trace or a workload generator, docs/numerics.md 2.3)
// rather than computed by a router: token t's slots are topk_idx[t, 0..K) in that order with weights
// topk_weights
// (-1 = no expert: kept in place as a slot with gate 0, like a dropped token-choice slot). Statistics:
// expert_load per expert, dropped_assignments = slots without an expert, dropped_tokens = tokens with none,
// drop_ratio = dropped_assignments / (T·K), compute_cost = static_cost = T·K, k_per_sample = K per sample, no
// capacity. Errors: sizes not T·K, T not a multiple of S, an id outside [-1, E) ("topk_idx[t][k]: ..."), one
// expert twice in a token, a non-finite weight.
Result<Routing> routing_from_topk(std::span<const std::int32_t> topk_idx, std::span<const float> topk_weights,
                                  std::int64_t num_tokens, std::int64_t num_experts, std::int64_t top_k,
                                  std::int64_t seq_len);

// The dispatch form of a routing (docs/dispatch.md 5): topk_idx / topk_weights [num_tokens, width],
// row-major, slots in slot order, padded with -1 / 0.0f.
struct FixedTopk {
  std::int64_t num_tokens = 0;
  std::int64_t width = 0;
  std::vector<std::int32_t> topk_idx;
  std::vector<float> topk_weights;
};

// width = nullopt uses the largest slot count of any token (at least 1). A token with more slots than
// `width` is an error ("width: token t has n slots, more than width w").
Result<FixedTopk> to_fixed_topk(const Routing& routing, std::optional<std::int64_t> width = std::nullopt);

}  // namespace eps::routing
