// Dispatch layout (docs/dispatch.md 5.1), bit-exact: what DeepEP's get_dispatch_layout returns on source rank
// r, plus the rank prefix matrix its dispatch returns (identical on every rank).
//
// For source rank r with T_r tokens:
// - num_tokens_per_rank [R]: tokens of r with q ∈ dst_ranks(r, t); a token counts ONCE per destination
//   rank however many of its slots live there.
// - num_tokens_per_expert [S]: valid slots of r's tokens per GLOBAL SLOT (expert_map.hpp), S =
//   ExpertMap::num_slots(). With the default placement S = E and this is the per-expert count of
//   docs/dispatch.md 5.1; with an EPLB placement it counts per physical slot (replica), S = P, which is what
//   a transport sizes its receive buffers with. Because a token's experts are distinct, this is also a token
//   count.
// - is_token_in_rank [T_r, R] row-major, 1 where q ∈ dst_ranks(r, t), else 0.
// - rank_prefix_matrix [R, R] row-major: [i][j] = Σ_{r ≤ i} num_tokens_per_rank of rank r for
//   destination j, i.e. the number of rows rank j receives from ranks 0..i inclusive. Column j is
//   non-decreasing in i and [R-1][j] is rank j's rank-major row count (docs/dispatch.md 5.2).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::dispatch {

struct DispatchLayout {
  int rank = -1;                               // the source rank r
  std::vector<int> num_tokens_per_rank;        // [R]
  std::vector<int> num_tokens_per_expert;      // [S]
  std::vector<std::uint8_t> is_token_in_rank;  // [T_r, R]
  std::vector<int> rank_prefix_matrix;         // [R, R]
};

// Error: rank outside [0, R).
Result<DispatchLayout> expected_layout(const DispatchPlan& plan, int rank);

// The [R, R] rank prefix matrix alone (no per-rank data).
std::vector<int> rank_prefix_matrix(const DispatchPlan& plan);

}  // namespace eps::dispatch
