// Expert-choice routing (docs/routing.md 3.3) with step-dependent capacity (docs/routing.md 3.4,
// schedule.hpp).
//
// Variant `kDlm` ("ec", EC-DLM semantics, the default):
//   Capacity. Sequence scope: per sample b, c_b = max(floor(S·k_b / E), 1). Batch scope: one capacity
//   over all B·S tokens from the largest per-sample k, c = max(floor(B·S·max_b k_b / E), 1) (not a sum over
//   samples; with a static schedule max(floor(B·S·k / E), 1)). k_b <= E (validated), so c_b <= S and
//   c <= B·S always: no clamping. Selection. Per sample b (batch scope: over all tokens) and expert j, the
//   c_b tokens with the canonical-first raw logits l[i][j] (docs/numerics.md 1.3: larger logit first, lower
//   token position wins ties; -inf last but still selected when c_b needs it). J_i = experts that picked
//   token i, ascending. Gates, fp32, sums in ascending j starting from 0.0f, exp = portable_exp
//   (docs/numerics.md 1.5):
//     softmax: m_i = max_{j∈J_i} l_ij; g_ij = exp(l_ij − m_i) / (Σ_{j'∈J_i} exp(l_ij' − m_i) + 1e-20f).
//              When every l_ij of J_i is -inf (m_i = -inf) every exp term is taken as 0: g_ij = 0.0f.
//     sigmoid: g_ij = σ(l_ij) / (Σ_{j'∈J_i} σ(l_ij') + 1e-20f).
//   Slot weight (the gate reported): w_ij = g_ij · Fscale[|J_i|] in fp32 (docs/layer.md 4.3); Fscale has E +
//   1 entries (empty: all 1.0; entry 0 is never used). |J_i| = 0: the token is dropped (no slot).
// Variant `kSoftmax` ("ec-softmax", Zhou et al.): P_i = softmax over all E experts of row i (scores.hpp);
//   selection as above but by P[i][j] instead of l[i][j]; gate = P[i][j], no renormalization, no Fscale.
// Output (routing.hpp): slots in ascending expert id; k_per_sample = k_b; capacity_per_sample = c_b
// (sequence scope) or capacity = c (batch scope); expert_load = kept tokens per expert (Σ_b c_b or c);
// dropped_tokens = #{i : |J_i| = 0}; drop_ratio = dropped_tokens / T; padding_waste over E·Σ_b c_b (or
// E·c) slots; compute_cost = Σ_b S·k_b; static_cost = B·S·k.
//
// Contract (validate_expert_choice, fields prefixed with `prefix`): the KSchedule contract (schedule.hpp);
// fscale empty or of size E + 1 with finite values, and empty for ec-softmax; a non-static schedule
// needs input.mask_ratio (B values, checked by validate_routing_input).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/routing/routing.hpp"
#include "reference/routing/schedule.hpp"
#include "reference/routing/token_choice.hpp"

namespace eps::routing {

enum class ExpertChoiceVariant { kDlm, kSoftmax };
enum class CapacityScope { kSequence, kBatch };

struct ExpertChoiceConfig {
  ExpertChoiceVariant variant = ExpertChoiceVariant::kDlm;
  CapacityScope scope = CapacityScope::kSequence;
  ScoreFunction gate = ScoreFunction::kSoftmax;  // kDlm only
  KSchedule k_schedule;
  std::vector<float> fscale;  // [E + 1] or empty (kDlm only)
};

Status validate_expert_choice(const ExpertChoiceConfig& config, std::int64_t num_experts,
                              std::string_view prefix = "");

// c_b = max(floor(S·k_b / E), 1) (also the batch capacity with S·k_b replaced by B·S·max_b k_b).
std::int64_t expert_choice_capacity(std::int64_t tokens_times_k, std::int64_t num_experts);

// Validates `input` and `config` (including "mask_ratio: required ..." for a non-static schedule), then
// routes.
Result<Routing> route_expert_choice(const ExpertChoiceConfig& config, const RoutingInput& input);

}  // namespace eps::routing
