// LL (low-latency) dispatch (docs/dispatch.md 5.4): the expected packed layout of destination rank q, and a
// checker that accepts any valid block order (unordered backends) or only the canonical one (ordered
// backends).
//
// Shapes, with L = plan.num_local_experts() and C = R · T_max (config.max_tokens_per_rank):
// - packed_recv_x [L, C, row_bytes]; packed_recv_x_scales [L, C, H/128] (fp8 only);
// - packed_recv_count [L];
// - src_info [L, C]: the SOURCE TOKEN index t of each packed row (its source rank is given by the block);
// - layout_range [L, R]: (begin, count) of source rank r's block inside local expert l's rows.
// Content: one row per (r, t, k) whose slot k is placed on (q, l) — no per-rank deduplication, a token
// with two experts on q appears once under each. For every l, the non-empty blocks are contiguous,
// disjoint and cover [0, packed_recv_count[l]); block (l, r) holds exactly the tokens t of r with a slot
// on (q, l), and each row is the source payload (and scales) bit-for-bit. Rows at or beyond the count
// are don't-care. The canonical ("ordered") form puts blocks in ascending r (begin = Σ_{r' < r} counts,
// also for empty blocks) and rows in ascending t; expected_ll builds it, with don't-care rows zeroed
// and src_info -1. T_r > T_max is rejected when the plan is made (dispatch_plan.hpp).
//
// Cost: the index is O(Σ T_r · K + L · C); expected_ll additionally materializes L · C rows (up to
// 32 · 1024 · 7168 B = 235 MB for ll-deepseek-v3 at T_max 128), so conformance checks of large shapes use
// check_ll_dispatch, which fetches only the rows it compares.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/row_source.hpp"

namespace eps::dispatch {

struct LlRange {
  int begin = 0;
  int count = 0;
  friend bool operator==(const LlRange&, const LlRange&) = default;
};

struct LlIndex {
  int rank = -1;                       // q
  int capacity = 0;                    // C = R · T_max rows per local expert
  std::vector<int> packed_recv_count;  // [L]
  std::vector<LlRange> layout_range;   // [L, R], canonical order
  std::vector<int> src_info;           // [L, C]; -1 at and beyond the count
  std::vector<int> src_slot;           // [L, C]: the slot k of each row; -1 at and beyond the count
};

struct LlExpected {
  LlIndex index;
  std::vector<std::byte> packed_recv_x;     // [L, C, row_bytes], zero beyond the counts
  std::vector<float> packed_recv_x_scales;  // [L, C, H/128] (fp8), empty (bf16)
};

// Error: rank outside [0, R).
Result<LlIndex> ll_index(const DispatchPlan& plan, int rank);
Result<LlExpected> expected_ll(const DispatchPlan& plan, int rank, const RowSource& source);

// What a transport returned on rank q (flat row-major spans with the shapes above).
struct LlView {
  std::span<const std::byte> packed_recv_x;
  std::span<const float> packed_recv_x_scales;  // empty for bf16
  std::span<const int> packed_recv_count;
  std::span<const int> src_info;
  std::span<const LlRange> layout_range;
};

enum class LlOrder {
  kOrdered,    // canonical block order and ascending t inside a block
  kUnordered,  // any block placement and any row order inside a block (docs/dispatch.md 5.4)
};

// Checks `actual` against the plan and the RowSource. Mismatch fields: "packed_recv_count" (column l),
// "layout_range" (column = index l·R + r; block count, begin, out of [0, count), overlap, row not
// covered), "src_info" (a token not expected in the block or repeated, an expected token missing, or in
// ordered mode a token out of place), "packed_recv_x" / "packed_recv_x_scales" (payload of a row whose
// src_info names an expected token; src = (r, t), column = element). Errors (not mismatches): rank out of
// range, a view span whose size differs from its shape.
Result<MismatchReport> check_ll_dispatch(const DispatchPlan& plan, int rank, const RowSource& source,
                                         const LlView& actual, LlOrder order);

}  // namespace eps::dispatch
