// Combine trees of the MoE layer (docs/layer.md 4.3, docs/dispatch.md 5.5): how a token's weighted expert
// outputs become its bf16 routed output. The single-process layer evaluates ht-rank and ll-weighted for a
// given R and placement, so a distributed layer is compared bit-exactly with the reference for the tree its
// transport declares. The tree enum and its arithmetic are the dispatch reference's
// (reference/dispatch/combine_tree.hpp): the layer only says which rows are summed.
//
// A token's slots are given in slot order (docs/layer.md 4.3: token choice = router order, expert choice =
// ascending expert id); a slot with expert -1 (a dropped token-choice assignment) is skipped. With
// w the slot weight and y the bf16 expert output, every sum is fp32 in the order written, starting from
// 0.0f, one rounding per operation (docs/numerics.md 1.4, no FMA):
//   ll-weighted:  routed = bf16(Σ_{slots ascending} w · fp32(y))
//   ht-rank:      p_q = bf16(Σ_{slots on rank q, ascending} w · fp32(y)) for every rank q owning a slot;
//                 routed = bf16(Σ_{q ascending} fp32(p_q))
// That is: ht-rank's p_q is ll-weighted over rank q's slots, and routed is the dispatch reference's ht-rank
// sum of those partials without biases (docs/dispatch.md 5.5). A token with no valid slot gets routed = +0
// (both trees). With R = 1, or whenever all of a token's slots live on one rank, ht-rank equals ll-weighted
// bit for bit (bf16(0 + p) = p). ht-two-level is a transport tree only: the layer reference refuses it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/combine_tree.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps {

// The trees the layer reference evaluates, by name: "ll-weighted" or "ht-rank" (else kInvalidArgument naming
// `field` and both names).
Result<CombineTree> parse_combine_tree(std::string_view field, std::string_view name);

// Expert -> rank placement for ht-rank. `expert_rank` empty means the default placement: expert e on rank
// e / (E / R), which needs R to divide E. Errors name the fields: "num_ranks: ...", "expert_rank[e]: ...".
Result<std::vector<int>> resolve_expert_rank(int num_experts, int num_ranks,
                                             std::span<const int> expert_rank);

// Combines one token with `tree` (ll-weighted or ht-rank). experts[k], weights[k] are slot k's expert id
// (-1 = skip) and weight w; y holds one bf16 row of `hidden` values per slot (row k belongs to slot k; rows
// of skipped slots are ignored); expert_rank maps an expert id to its rank (ht-rank only; may be empty for
// ll-weighted). Writes `hidden` values to out. Preconditions (not checked): sizes consistent, ids in range.
void combine_token(CombineTree tree, std::span<const std::int32_t> experts, std::span<const float> weights,
                   std::span<const bf16> y, int hidden, std::span<const int> expert_rank,
                   std::span<bf16> out);

}  // namespace eps
