// HT dispatch, expert-major layout "O-expert" (docs/dispatch.md 5.3, Megatron alltoall order): the expected
// outputs of destination rank q.
//
// Rows: one per (local expert l, source rank r, source token t) such that some slot k of (r, t) is placed
// on (q, l), sorted lexicographically by (l, r, t). Distinct experts per token (dispatch_plan.hpp) make
// that slot unique. Local expert l owns the segment [segment_begin[l], segment_begin[l+1]): its `counts[l]`
// real rows followed by padding rows up to the next multiple of config.expert_alignment, so
// segment_begin[l+1] - segment_begin[l] = align_up(counts[l], expert_alignment).
// Per row:
// - recv_x [rows, row_bytes] and recv_x_scales [rows, H/128] (fp8 only): the source row and scales
//   bit-for-bit; padding rows are all zero bytes (scales too);
// - rows[i]: source (r, t), the slot k, and the slot's weight bit-for-bit; padding rows have source
//   (-1, -1), slot -1 and weight +0.0f.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/row_source.hpp"

namespace eps::dispatch {

struct ExpertMajorRow {
  int local_expert = -1;
  SourceToken source;  // (-1, -1) for padding
  int slot = -1;       // k, -1 for padding
  float weight = 0.0f;
};

struct ExpertMajorIndex {
  int rank = -1;                             // q
  std::vector<int> counts;                   // [L] real rows per local expert
  std::vector<int> segment_begin;            // [L + 1]
  std::vector<ExpertMajorRow> rows;          // [segment_begin[L]]
  std::vector<SourceToken> sources() const;  // rows[i].source for every row
};

struct ExpertMajorExpected {
  ExpertMajorIndex index;
  std::vector<std::byte> recv_x;     // [rows, row_bytes]
  std::vector<float> recv_x_scales;  // [rows, H/128] (fp8), empty (bf16)
};

// Error: rank outside [0, R).
Result<ExpertMajorIndex> expert_major_index(const DispatchPlan& plan, int rank);
Result<ExpertMajorExpected> expected_expert_major(const DispatchPlan& plan, int rank,
                                                  const RowSource& source);

struct ExpertMajorView {
  std::span<const std::byte> recv_x;
  std::span<const float> recv_x_scales;
  std::span<const float> recv_weights;  // [rows]: the weight of each row (Megatron's permuted probs)
};

// recv_x, recv_x_scales (fp8) and recv_weights bit-exactly, padding rows included.
MismatchReport compare_expert_major(const DispatchPlan& plan, const ExpertMajorExpected& expected,
                                    const ExpertMajorView& actual);

}  // namespace eps::dispatch
