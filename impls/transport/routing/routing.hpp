// The routing of one rank's tokens: the layout math every transport shares (docs/dispatch.md 5.1-5.4). Host
// code over index arrays only; no token bytes pass through here.
// - local_layout / rank_prefix_matrix: the docs/dispatch.md 5.1 layout of this rank's tokens and the prefix
//   matrix made from every rank's counts.
// - SendPlan / plan_sends: the records a fresh dispatch sends, in send order.
// - localize_routing / count_rank_major: the receive side of rank-major rows (docs/dispatch.md 5.2).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "impls/transport/transport.hpp"
#include "reference/dispatch/layout.hpp"

namespace eps::transport {

// The source side of one dispatch: the caller's routing and the records to send, in send order. Keys group
// the records: the destination rank q for rank-major (one record per (q, t) with q in dst_ranks(t), t
// ascending), the global expert e = q * L + l for the slot layouts (one record per valid (t, k), t
// ascending), so records go by q, then l, then t.
struct SendPlan {
  Layout layout = Layout::kHtRankMajor;
  int num_tokens = 0;
  std::vector<int> topk_idx;             // [T, K], copied from the input
  std::vector<float> topk_weights;       // [T, K]
  std::vector<int> record_token;         // per record: its source token
  std::vector<std::int64_t> record_row;  // record_token widened: the row list of the pack kernels
  std::vector<int> record_slot;          // per record: its slot k, or -1 for rank-major records
  std::vector<int> key_begin;            // [keys + 1]: the first record of each key
  std::vector<int> destination_begin;    // [R + 1]: the first record to each destination rank

  int records() const { return static_cast<int>(record_token.size()); }
  // Records to `rank`: [destination_begin[rank], destination_begin[rank + 1]).
  int first_to(int rank) const { return destination_begin[static_cast<std::size_t>(rank)]; }
  int count_to(int rank) const { return first_to(rank + 1) - first_to(rank); }
};

// The plan of a fresh dispatch of `input` (already checked) in `layout`.
SendPlan plan_sends(Layout layout, const TransportConfig& config, int num_ranks, const DispatchInput& input);

// docs/dispatch.md 5.1 for `topk_idx` [T, K] of this rank: tokens per rank, per expert, is_token_in_rank. The
// rank prefix matrix (which needs every rank's counts) is left empty: see rank_prefix_matrix.
dispatch::DispatchLayout local_layout(const TransportConfig& config, int num_ranks, int rank, int num_tokens,
                                      std::span<const int> topk_idx);
// [i][j] = tokens rank j receives from ranks 0..i, from every rank's num_tokens_per_rank ([R][R], row =
// sender).
std::vector<int> rank_prefix_matrix(int num_ranks, std::span<const int> tokens_per_rank_of_every_rank);

// One received rank-major record on `rank`: the token's routing [K] becomes recv_topk_idx (local index or -1)
// and recv_topk_weights (+0.0f where not local), docs/dispatch.md 5.2.
void localize_routing(const TransportConfig& config, int num_ranks, int rank, const std::int32_t* topk_idx,
                      const float* topk_weights, int* recv_topk_idx, float* recv_topk_weights);
// num_recv_tokens_per_expert [L] of `rows` rank-major rows: valid local slots, rounded up to the alignment.
void count_rank_major(const TransportConfig& config, int num_ranks, std::int64_t rows,
                      const DispatchOutput& output);

}  // namespace eps::transport
