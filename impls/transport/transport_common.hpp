// Pieces every transport backend shares (mpi, direct, ...): argument checks of the Transport contract,
// the SPEC 5.1 layout of a rank's own tokens, the receive-side routing of rank-major rows, and the
// source-side reductions of the SPEC 5.5 combine trees. Backends differ in how bytes move, not in these.
//
// Reductions take one pointer per returned record (the bf16 row [H] a peer sent back for one dispatched
// record), so a backend can reduce straight from wherever the rows landed:
// - reduce_ht: records grouped by expert-side rank q ascending (`peer_begin` [R + 1] = first record of each
//   q), `record_token` the source token of each record; ht-rank adds every row to fp32(bias0) + fp32(bias1)
//   in ascending q; ht-two-level first sums each node's ranks in fp32, rounds that to bf16, then adds it.
// - reduce_ll: `slot_rows` [T, K] = the returned row of (t, k) or nullptr for a masked slot; the result is
//   bf16(sum over valid k ascending of w_k * y_k), exact 0 for a token without a valid slot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "impls/transport/transport.hpp"

namespace eps::transport {

// kInvalidArgument naming the field: T_r in [0, T_max], x / x_scales sizes, and (need_routing) topk sizes
// and expert indices in [-1, E - 1].
Status check_dispatch_input(const TransportConfig& config, const DispatchInput& input, bool need_routing);
// Every span of `layout` holds at least recv_capacity_rows(layout) rows.
Status check_dispatch_output(const TransportConfig& config, int num_ranks, Layout layout,
                             const DispatchOutput& output);
// The tree fits the handle's layout; x holds the handle's rows (LL: the whole [L, C, H]); biases, out and
// combined_weights are empty or sized [T_r, ...].
Status check_combine_args(const TransportConfig& config, int num_ranks, const DispatchHandle& handle,
                          int num_tokens, const CombineInput& input, const CombineOutput& output);

// SPEC 5.1 for `topk_idx` [T, K] of this rank: tokens per rank, per expert, is_token_in_rank. The rank
// prefix matrix (which needs every rank's counts) is left empty: see rank_prefix_matrix.
dispatch::DispatchLayout local_layout(const TransportConfig& config, int num_ranks, int rank, int num_tokens,
                                      std::span<const int> topk_idx);
// [i][j] = tokens rank j receives from ranks 0..i, from every rank's num_tokens_per_rank ([R][R], row =
// sender).
std::vector<int> rank_prefix_matrix(int num_ranks, std::span<const int> tokens_per_rank_of_every_rank);

// One received rank-major record on `rank`: the token's routing [K] becomes recv_topk_idx (local index or -1)
// and recv_topk_weights (+0.0f where not local), SPEC 5.2.
void localize_routing(const TransportConfig& config, int num_ranks, int rank, const std::int32_t* topk_idx,
                      const float* topk_weights, int* recv_topk_idx, float* recv_topk_weights);
// num_recv_tokens_per_expert [L] of `rows` rank-major rows: valid local slots, rounded up to the alignment.
void count_rank_major(const TransportConfig& config, int num_ranks, std::int64_t rows,
                      const DispatchOutput& output);

void reduce_ht(const TransportConfig& config, int num_ranks, int num_tokens, CombineTree tree,
               std::span<const int> peer_begin, std::span<const int> record_token,
               std::span<const bf16* const> rows, std::span<const bf16> bias0, std::span<const bf16> bias1,
               std::span<bf16> out);
void reduce_ll(const TransportConfig& config, int num_tokens, std::span<const float> topk_weights,
               std::span<const bf16* const> slot_rows, std::span<bf16> out);
// combined_weights [T, K]: the input weight of valid slots, +0.0f for masked ones (SPEC 5.5).
void write_combined_weights(std::span<const int> topk_idx, std::span<const float> topk_weights,
                            std::span<float> out);

}  // namespace eps::transport
