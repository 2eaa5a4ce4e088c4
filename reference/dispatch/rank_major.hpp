// HT dispatch, rank-major layout "O-rank" (docs/dispatch.md 5.2): the expected outputs of destination rank q.
//
// Rows: one per (r, t) with q ∈ dst_ranks(r, t), ordered by (r ascending, t ascending); N_q rows in all
// (= rank_prefix_matrix[R-1][q], layout.hpp). Row i carries:
// - recv_x [N_q, row_bytes]: the source payload row bit-for-bit (bf16 bits, or fp8 codes);
// - recv_x_scales [N_q, H/128] (fp8 only, empty for bf16): the source scales bit-for-bit;
// - recv_topk_idx [N_q, K]: for each source slot k, the LOCAL expert index on q (expert_map.hpp; the local
//   slot index under an EPLB placement) when slot k's expert is placed on q, else -1;
// - recv_topk_weights [N_q, K]: the source weight bit-for-bit where recv_topk_idx >= 0, else +0.0f;
// - sources [N_q]: the (r, t) of each row (what DeepEP keeps in its handle).
// num_recv_tokens_per_expert [L]: per local expert, the number of rows with a slot on it (valid local
// slots), each rounded up to a multiple of config.expert_alignment (1 = no rounding).
//
// The index (everything but payloads) costs O(Σ_r T_r · K) and needs no RowSource; expected_rank_major
// adds N_q payload rows fetched from the RowSource.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/row_source.hpp"

namespace eps::dispatch {

struct RankMajorIndex {
  int rank = -1;                                // q
  std::vector<SourceToken> sources;             // [N_q]
  std::vector<int> recv_topk_idx;               // [N_q, K]
  std::vector<float> recv_topk_weights;         // [N_q, K]
  std::vector<int> num_recv_tokens_per_expert;  // [L], aligned
  std::size_t num_rows() const { return sources.size(); }
};

struct RankMajorExpected {
  RankMajorIndex index;
  std::vector<std::byte> recv_x;     // [N_q, row_bytes]
  std::vector<float> recv_x_scales;  // [N_q, H/128] (fp8), empty (bf16)
};

// Error: rank outside [0, R).
Result<RankMajorIndex> rank_major_index(const DispatchPlan& plan, int rank);
Result<RankMajorExpected> expected_rank_major(const DispatchPlan& plan, int rank, const RowSource& source);

// What a transport returned on rank q, as flat row-major spans with the shapes above.
struct RankMajorView {
  std::span<const std::byte> recv_x;
  std::span<const float> recv_x_scales;
  std::span<const int> recv_topk_idx;
  std::span<const float> recv_topk_weights;
  std::span<const int> num_recv_tokens_per_expert;
};

// Compares every array bit-exactly (compare.hpp). recv_x columns are elements (bf16 or fp8), not bytes.
MismatchReport compare_rank_major(const DispatchPlan& plan, const RankMajorExpected& expected,
                                  const RankMajorView& actual);

}  // namespace eps::dispatch
