// Token-choice routing (docs/routing.md 3.1) with capacity and drops (docs/routing.md 3.2), the reference
// every TC router of epsuite is compared with exactly.
//
// Per token t, in fp32 (docs/numerics.md 1.4, operation order as written):
//   1. Scores p_e: `softmax` (scores.hpp: max-subtracted, sum ascending e; a row of all -inf gives p = 0)
//      or `sigmoid` σ(l_e) = 1 / (1 + exp(−l_e)).
//   2. Selection key q_e = p_e + bias_e (bias empty: q_e = p_e). The bias only selects; gates use p.
//      Because selection uses scores, experts whose softmax score underflows to 0 tie with -inf logits
//      and are ordered by index (docs/numerics.md 1.3 on the key).
//   3. Group-limited routing (DeepSeek-V3) when groups G > 1: the E experts form G groups of E/G
//      consecutive ids; group key = q_a + q_b of the group's two canonical-first keys (one key if E/G = 1);
//      keep the topk_groups canonical-first groups; only their experts are candidates.
//   4. Selection: the K canonical-first candidates by q. Slot order = that canonical order of q.
//   5. Gates: renorm: g_k = (p_k / Σ p) · scaling, Σ over the K selected slots in slot order starting
//      from 0.0f (sigmoid: σ / Σσ); if that sum is 0 (every selected score is 0) every gate is 0.0f.
//      Without renorm: g_k = p_k · scaling. (scaling = routed_scaling_factor; 1.0 multiplies exactly.)
//   6. Capacity (docs/routing.md 3.2), per expert over all T tokens of the batch (computed in double):
//        megatron: C = ceil((double(T·K) / E) · cf)   (Megatron-Core's get_capacity operation order; a
//                  decimal cf that is not exact in binary can land one above the decimal answer, e.g.
//                  T·K/E = 50, cf = 1.1 gives 55.00000000000001 -> C = 56)
//        gshard:   C = K · floor(cf · ceil(T / E))    (Tutel; ceil(T/E) in integers)
//        dropless: no capacity.
//      Drop priority `position`: assignments are visited k-major, then by token index (all first choices
//      before any second choice) and kept while the expert has room. `probs`: per expert the C
//      assignments with the largest final gates are kept, ties to the lower token index. A dropped slot
//      stays in place with expert -1 and gate 0.0f; kept gates are not renormalized.
// Output (routing.hpp): K slots per token; dropped_tokens counts tokens with all K slots dropped;
// drop_ratio = dropped assignments / (T·K); padding_waste = (E·C − kept) / (E·C) (nullopt when dropless
// or E·C = 0); compute_cost = static_cost = T·K; k_per_sample = K per sample.
//
// Contract (validate_token_choice, every field prefixed with `prefix`): k in [1, E]; bias empty or of size
// E with finite values; groups in [1, E] dividing E; topk_groups in [1, groups]; K <= topk_groups·(E/G);
// scaling finite; cf finite and in (0, 1e6] when capacity is not dropless.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/routing/routing.hpp"

namespace eps::routing {

enum class ScoreFunction { kSoftmax, kSigmoid };
enum class CapacityFormula { kDropless, kMegatron, kGshard };
enum class DropPriority { kPosition, kProbs };

struct TokenChoiceConfig {
  ScoreFunction score = ScoreFunction::kSoftmax;
  std::int64_t k = 1;
  bool renorm = false;
  std::vector<float> bias;  // [E] selection bias, or empty
  std::int64_t groups = 1;
  std::int64_t topk_groups = 1;
  float scaling = 1.0f;  // routed_scaling_factor
  CapacityFormula capacity = CapacityFormula::kDropless;
  double capacity_factor = 1.0;  // cf
  DropPriority drop = DropPriority::kPosition;
};

Status validate_token_choice(const TokenChoiceConfig& config, std::int64_t num_experts,
                             std::string_view prefix = "");

// Per-expert capacity C for T tokens (formulas above); nullopt for dropless. Arguments must satisfy the
// contract (T >= 1, 1 <= K <= E, cf in (0, 1e6]).
std::optional<std::int64_t> token_choice_capacity(CapacityFormula formula, std::int64_t num_tokens,
                                                  std::int64_t k, std::int64_t num_experts, double cf);

// Validates `input` (routing.hpp) and `config`, then routes.
Result<Routing> route_token_choice(const TokenChoiceConfig& config, const RoutingInput& input);

}  // namespace eps::routing
