// The distributed MoE layer stack of docs/layer.md 4.4: what every rank agrees on before a step, and the
// single-process reference it is compared with.
//
// Tokens. The B samples of S tokens are spread over the R ranks in sample-major order: rank r holds the
// rank_tokens[r] tokens (a multiple of S, 0 allowed) that start at global token prefix_r = Σ_{q<r}
// rank_tokens[q], so an expert-choice sequence never spans ranks. Token g's payload is
// data::payload_value(seed, rank 0, g, ·) and its logits at layer l are data::router_logit(seed, l, rank 0,
// g, ·) (docs/numerics.md 2.2), so no rank's data depends on R. mask_ratio holds one r_b per global sample
// (the diffusion step, docs/routing.md 3.4) or is empty.
//
// Layers. Layer l (0 .. num_layers - 1) has the routed experts (seed, l, kRouted, e) and the shared experts
// (seed, l, kShared, s); its input is the payload for l = 0 and layer l - 1's output after that.
//
// Routing runs where the tokens live (each rank routes its own tokens: token-choice capacity holds per rank,
// expert-choice batch scope is refused for R > 1). Dispatch carries `dtype` rows (fp8: per-128 group codes
// with power-of-two scales, docs/numerics.md 1.2) in `layout`; the combine tree follows it: ht-rank after
// ht-rank-major, ll-weighted after ht-expert-major and ll (docs/layer.md 4.3). The expert kernel is the
// batch-invariant tree kernel (reference `vectorized`, impls/device/device_expert.hpp), so the reference is
// run_moe_layer with kernel kVectorized, routing_groups = rank_tokens, the same dtype and tree, R ranks and
// the transports' placement (expert e on rank e / (E / R)).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "impls/transport/transport.hpp"
#include "reference/data/workload.hpp"
#include "reference/eplb/replica_rule.hpp"
#include "reference/layer/moe_layer.hpp"
#include "reference/routing/router.hpp"

namespace eps::layer {

inline constexpr int kMaxLayers = 1024;

struct LayerSpec {
  std::uint64_t seed = 0;
  int num_layers = 1;        // [1, kMaxLayers]
  int hidden = 0;            // H
  int ffn = 0;               // F of the routed experts
  int num_experts = 0;       // E, a multiple of R
  int num_shared = 0;        // shared experts
  int shared_ffn = 0;        // their F
  std::int64_t seq_len = 1;  // S
  routing::RouterConfig router;
  std::vector<std::int64_t> rank_tokens;  // [R]
  std::vector<float> mask_ratio;          // [B] or empty
  dispatch::PayloadType dtype = dispatch::PayloadType::kBf16;
  transport::Layout layout = transport::Layout::kLl;
  // Routing given by a docs/numerics.md 2.3 workload (a recorded trace:FILE, zipf:S, ...) instead of
  // `router`: rank r's tokens at layer l take data::generate_routing(workload, {R, E, routing_top_k}, {seed,
  // r, l, step 0, tokens [0, T_r), S}) as fixed slots (routing::routing_from_topk; -1 = no expert). Empty:
  // the router.
  std::optional<data::WorkloadSpec> routing_workload;
  int routing_top_k = 0;  // K of the workload's slots (a trace's own K)
  int step = 0;           // the workload's step (docs/numerics.md 2.3, e.g. drift), [0, data::kMaxStep]
  // Expert placement (docs/eplb.md 8.1, 8.4): P physical slots (0 = E), P / R per rank, each holding one
  // logical expert; the transport's experts are the slots. (token, k) goes to the replica replica_rule picks;
  // local-first's node is ranks_per_node consecutive ranks (also the move accounting's node).
  int num_slots = 0;
  eplb::ReplicaRule replica_rule = eplb::ReplicaRule::kModulo;
  int ranks_per_node = 1;

  std::int64_t num_tokens() const;           // T = Σ rank_tokens
  std::int64_t first_token(int rank) const;  // prefix_r
  std::int64_t max_rank_tokens() const;      // T_max of the transport
  int num_ranks() const { return static_cast<int>(rank_tokens.size()); }
  int slots() const { return num_slots > 0 ? num_slots : num_experts; }  // P
};

// The combine tree that follows `layout` in a layer: ht-rank-major -> ht-rank, else ll-weighted.
CombineTree layer_tree(transport::Layout layout);

// Slots a token can have, the transport's top-k: the workload's K, K for token choice, min(E, kMaxTopK) for
// expert choice (a token picked by more experts than that is refused when routed).
int slot_width(const LayerSpec& spec);

// Every field, for R = rank_tokens.size() ranks: the reference layer's checks (validate_moe_layer_config of
// layer 0's reference config), num_layers, E % R, expert-choice batch scope only with R = 1, num_slots (0 or
// a multiple of R >= E, and then not with ht-rank-major, whose ht-rank tree depends on the placement),
// ranks_per_node dividing R, step, and the transport's shapes (validate_config). kInvalidArgument naming the
// field.
Status validate_layer_spec(const LayerSpec& spec);

// The reference configuration of layer `layer` (see above).
MoeLayerConfig reference_layer_config(const LayerSpec& spec, int layer);

// The transport configuration a layer of `spec` needs on `comm` (buffers in `device`'s memory).
transport::TransportConfig layer_transport_config(const LayerSpec& spec, MPI_Comm comm,
                                                  device::Device* device, double timeout_seconds);

// Rank `rank`'s routing at `layer` from spec.routing_workload (see LayerSpec).
Result<routing::Routing> workload_routing(const LayerSpec& spec, int layer, int rank);

// The single-process reference of the whole stack: out [T, H] of the last layer for every token.
Result<std::vector<bf16>> reference_stack_output(const LayerSpec& spec);

// Rank `rank`'s stack output `got` [T_r, H] against its rows of `reference` [T, H], bit for bit: how many
// values differ, and the first ("rank r token g channel c: got 0x.... (v), reference 0x.... (v)"; "" if
// none).
struct OutputMismatches {
  std::int64_t count = 0;
  std::string first;
};
OutputMismatches compare_with_reference(const LayerSpec& spec, int rank, std::span<const bf16> got,
                                        std::span<const bf16> reference);

}  // namespace eps::layer
