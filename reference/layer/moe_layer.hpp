// Single-process MoE layer reference (docs/layer.md 4.3): router -> routed experts -> combine tree -> +
// shared experts. Distributed layers are compared with it bit for bit when they use the same expert kernel
// and the same combine tree (docs/layer.md 4.2).
//
// For a batch of T = B·S tokens (sample-major: token i is in sample i / S):
//   1. logits [T, E] (fp32): `generated` = docs/numerics.md 2.2 router logits data::router_logit(seed, layer,
//   rank 0,
//      token i, expert e); `gate` = the gate GEMM x · Wg^T with Wg [E, H] bf16 from
//      data::fill_expert_weight(seed, layer, kGate, 0, E, H), each logit an fp32 dot product in
//      ascending h from 0.0f (docs/numerics.md 1.4).
//   2. routing = routing::route(router, logits, S, mask_ratio): slots in docs/layer.md 4.3 slot order with
//      their final weights w (EC: g_ij · Fscale[|J_i|]; TC: g_ij; a dropped TC slot is expert -1, skipped).
//      With routing_groups, each group of consecutive tokens (a rank's tokens, docs/layer.md 4.4) is routed
//      on its own and the parts joined (routing::join_routings): token-choice capacity then holds per rank,
//      as in a distributed layer; expert-choice sequence scope is the same either way.
//   3. Every routed expert e runs once on the rows of the tokens that have a slot on e (ascending token
//      order; the kernels are batch invariant, so the grouping does not change any bit). With
//      dispatch_dtype fp8 the routed experts see each row after the fp8 round trip of docs/numerics.md 1.2
//      (per-128 group quantization with power-of-two scales, kRoundScale, dequantized; bf16 holds the result
//      exactly); shared experts always see x itself. Its weights are
//      generate_expert_weights(seed, layer, kRouted, e, {H, F}); experts with no rows are never built.
//   4. routed_i = the combine tree (combine.hpp) over token i's slots; a token with no slot gets +0.
//   5. Shared experts s = 0..num_shared-1 (weights generate_expert_weights(seed, layer, kShared, s,
//      {H, shared_ffn})) run on every token, and
//        out_i = bf16(((fp32(routed_i) + fp32(shared_0(x_i))) + fp32(shared_1(x_i))) + ...)
//      i.e. the fp32 sum starts from fp32(routed_i) and adds each shared output in ascending s, one
//      rounding per add, then one bf16 rounding. Without shared experts out_i = routed_i.
// Token payloads x [T, H] are data::payload_value(seed, rank 0, token i, column) unless given.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/layer/combine.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/routing/router.hpp"

namespace eps {

enum class LogitsSource { kGenerated, kGate };

// "generated" / "gate".
std::string_view logits_source_name(LogitsSource source);
Result<LogitsSource> parse_logits_source(std::string_view field, std::string_view name);

inline constexpr int kMaxSharedExperts = 64;
inline constexpr std::int64_t kMaxLayerTokens = std::int64_t{1} << 24;
inline constexpr int kMaxLayerExperts = 1 << 16;

struct MoeLayerConfig {
  std::uint64_t seed = 0;
  std::uint32_t layer = 0;       // layer id in the data streams, <= data::kMaxLayer
  int hidden = 0;                // H in [1, kMaxExpertDim]
  int ffn = 0;                   // F of the routed experts, [1, kMaxExpertDim]
  int num_experts = 0;           // E in [1, kMaxLayerExperts]
  int num_shared = 0;            // shared experts in [0, kMaxSharedExperts]
  int shared_ffn = 0;            // F of the shared experts, [1, kMaxExpertDim] when num_shared > 0
  std::int64_t seq_len = 0;      // S >= 1
  std::int64_t num_samples = 0;  // B >= 1, B·S <= kMaxLayerTokens
  routing::RouterConfig router;
  std::vector<float> mask_ratio;  // [B] r_b for step-dependent capacity (docs/routing.md 3.4), or empty
  LogitsSource logits = LogitsSource::kGenerated;
  CombineTree combine = CombineTree::kLlWeighted;
  int num_ranks = 1;             // R (ht-rank only)
  std::vector<int> expert_rank;  // [E] placement (ht-rank only), empty = expert e on rank e / (E / R)
  ExpertKernelKind kernel = ExpertKernelKind::kScalar;
  // Token counts of the routing groups in token order (step 2), each a multiple of S (0 allowed), summing
  // to T; empty = one group.
  std::vector<std::int64_t> routing_groups;
  dispatch::PayloadType dispatch_dtype = dispatch::PayloadType::kBf16;  // step 3; fp8 needs H % 128 == 0

  std::int64_t num_tokens() const { return seq_len * num_samples; }
};

// Checks every field; errors name it as the `epsuite ref layer` JSON does ("hidden: must be in ...",
// "router.k: ...", "expert_rank[3]: ...").
Status validate_moe_layer_config(const MoeLayerConfig& config);

// What the layer computes on: x [T, H] bf16 and logits [T, E] fp32, row-major.
struct MoeLayerInputs {
  std::vector<bf16> x;
  std::vector<float> logits;
  // A given routing of all T tokens (routing::routing_from_topk of a trace or workload generator): step 2 is
  // skipped and `logits` is not used.
  std::optional<routing::Routing> routing;
};

// The gate GEMM: logits[t][e] = Σ_h fp32(x[t][h]) · fp32(gate[e][h]), ascending h from 0.0f
// (docs/numerics.md 1.4). x is [T, H], gate is [E, H]. Errors: sizes not multiples of H / inconsistent.
Result<std::vector<float>> gate_logits(std::span<const bf16> x, std::span<const bf16> gate, int hidden);

// Generates x and the logits (step 1 above) for a valid config.
Result<MoeLayerInputs> generate_moe_layer_inputs(const MoeLayerConfig& config);

struct MoeLayerResult {
  routing::Routing routing;       // selection, weights and routing statistics (routing.hpp)
  std::vector<bf16> routed;       // [T, H] routed_i
  std::vector<bf16> out;          // [T, H] out_i
  std::int64_t expert_rows = 0;   // rows computed by routed experts (= valid slots)
  std::int64_t experts_used = 0;  // routed experts with at least one row
  std::int64_t shared_rows = 0;   // rows computed by shared experts (T · num_shared)
  std::vector<int> expert_rank;   // the resolved placement (ht-rank), empty for ll-weighted
};

// Runs the layer on given inputs (x [T, H], logits [T, E]). Errors: invalid config, input sizes,
// NaN logits (routing), weight generation.
Result<MoeLayerResult> run_moe_layer(const MoeLayerConfig& config, const MoeLayerInputs& inputs);

// generate_moe_layer_inputs + run_moe_layer.
Result<MoeLayerResult> run_moe_layer(const MoeLayerConfig& config);

}  // namespace eps
