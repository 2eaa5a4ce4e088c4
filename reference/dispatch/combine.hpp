// Expected combine outputs (docs/dispatch.md 5.5), bit-exact, bf16 out, for source rank r's tokens t in [0,
// T_r). Every tree accumulates in fp32 with one rounding per add (the library is built with
// -ffp-contract=off, so w·y and the following add are never fused) and rounds to bf16 once at the end
// (docs/numerics.md 1.1 round-to-nearest-even).
//
// - `ht-rank` (DeepEP V1 intranode; unweighted, the caller pre-weights its partials):
//     acc = fp32(bias0) + fp32(bias1)                 (an absent bias reads as +0.0f)
//     acc = acc + fp32(partial(q, r, t))  for q ∈ dst_ranks(r, t) ascending
//     out = bf16(acc)
//   i.e. the expression of docs/dispatch.md 5.5 `bias0 + bias1 + Σ_q partial_q` evaluated strictly left to
//   right. This equals "start from 0.0f, add bias0, bias1, then the partials" except when both biases are
//   -0.0 (then -0.0 vs +0.0 in the first add); DeepEP initializes its accumulator as bias0 + bias1, as here.
//   A token with no destination gives bf16(bias0 + bias1), +0.0 without biases.
// - `ht-two-level` (DeepEP V1 internode): the nodes of a NodeLayout (docs/dispatch.md 5.5.1: any sizes,
//   numbered by their lowest rank; node n = nodes.node_of[q]). For each node n holding some
//   q ∈ dst_ranks(r, t), ascending n:
//     node_n = bf16(0.0f + Σ_{q ∈ dst_ranks(r, t) on node n, ascending} fp32(partial(q, r, t)))
//   then, biases FIRST (the same initial value as ht-rank, DeepEP's RDMA-side order):
//     acc = fp32(bias0) + fp32(bias1);  acc = acc + fp32(node_n) for those n ascending;  out = bf16(acc)
//   Nodes without a destination contribute nothing (not even +0.0). With one rank per node it equals
//   ht-rank bit for bit.
// - `ll-weighted` (DeepEP LL, pplx, NCCL EP expert-major):
//     acc = 0.0f;  acc = acc + fp32(w_k) * fp32(slot_output(r, t, k)) for valid k ascending;  out = bf16(acc)
//   with w_k the source weight of slot k (plan.topk_weights). A token with no valid slot yields +0.0.
//   Masked slots are never read (neither their weight nor an output row).
//
// Every sum is written with CombineAccumulator (combine_tree.hpp), the arithmetic the MoE layer reference
// shares (reference/layer/combine.hpp). Callbacks fill one bf16 row of H elements; they are only called for
// the (q, r, t) / (r, t, k) the formulas above name, so an implementation can fetch or regenerate exactly
// those rows.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/combine_tree.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/node_layout.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps::dispatch {

// The bf16 row that expert-side rank q returned for source token (rank, token).
using PartialRowFn = std::function<void(int q, int rank, int token, std::span<bf16> row)>;
// A bias row of source token (rank, token).
using BiasRowFn = std::function<void(int rank, int token, std::span<bf16> row)>;
// The expert output y_k (bf16) of slot k of source token (rank, token).
using SlotOutputFn = std::function<void(int rank, int token, int k, std::span<bf16> row)>;

// Optional bias rows; an empty function means "no bias" (+0.0f).
struct CombineBias {
  BiasRowFn bias0;
  BiasRowFn bias1;
};

// Each returns [T_rank, H] row-major. Errors: rank outside [0, R); for ht-two-level, a node layout that
// fails NodeLayout::check(R).
Result<std::vector<bf16>> expected_ht_rank_combine(const DispatchPlan& plan, int rank,
                                                   const PartialRowFn& partial, const CombineBias& bias = {});
Result<std::vector<bf16>> expected_ht_two_level_combine(const DispatchPlan& plan, int rank,
                                                        const NodeLayout& nodes, const PartialRowFn& partial,
                                                        const CombineBias& bias = {});
Result<std::vector<bf16>> expected_ll_combine(const DispatchPlan& plan, int rank,
                                              const SlotOutputFn& slot_output);

// Compares a combined output [T_rank, H] with the expected one; row t is reported as source (rank, t).
MismatchReport compare_combine(const DispatchPlan& plan, int rank, std::span<const bf16> expected,
                               std::span<const bf16> actual);

// Combined top-k weights [T_rank, K] (docs/dispatch.md 5.5: bit-equal to the input weights). Valid slots must
// match the input bits; masked slots (topk_idx -1) are not compared, because DeepEP's HT combine returns 0.0
// there (it sums +0.0 from every rank) whatever the caller's input held.
MismatchReport compare_combined_weights(const DispatchPlan& plan, int rank, std::span<const float> actual);

}  // namespace eps::dispatch
