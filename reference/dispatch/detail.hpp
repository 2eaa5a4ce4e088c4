// Internal helpers shared by the reference/dispatch implementation files; not part of the API.
#pragma once

#include <cstddef>
#include <span>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/row_source.hpp"

namespace eps::dispatch::detail {

inline Status check_rank(const DispatchPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.num_ranks()) return out_of_range("rank", 0, plan.num_ranks() - 1, rank);
  return Status::ok_status();
}

inline int align_up(int count, int alignment) { return (count + alignment - 1) / alignment * alignment; }

// Fetches row i of `x` and `scales` (fp8 only) from `source` for source token sources[i]. Rows whose
// source rank is -1 (padding) are left untouched.
inline void fetch_rows(const DispatchPlan& plan, const RowSource& source,
                       std::span<const SourceToken> sources, std::span<std::byte> x,
                       std::span<float> scales) {
  const std::size_t row_bytes = plan.row_bytes();
  const auto num_scales = static_cast<std::size_t>(plan.num_scales());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].rank < 0) continue;
    source.fill_row(sources[i].rank, sources[i].token, x.subspan(i * row_bytes, row_bytes));
    if (num_scales > 0) {
      source.fill_scales(sources[i].rank, sources[i].token, scales.subspan(i * num_scales, num_scales));
    }
  }
}

// Bytes per payload element: 2 for bf16, 1 for fp8.
inline std::size_t element_bytes(const DispatchPlan& plan) {
  return plan.config().dtype == PayloadType::kBf16 ? 2 : 1;
}

// Compares received payload rows (bit patterns) and, for fp8, their scales, row by row against the expected
// ones; every mismatch names rank q, the row's source and the column.
inline void compare_payload_rows(MismatchReport& report, const DispatchPlan& plan, int q,
                                 std::span<const SourceToken> sources, std::span<const std::byte> expected_x,
                                 std::span<const float> expected_scales, std::span<const std::byte> actual_x,
                                 std::span<const float> actual_scales) {
  const std::size_t elem = element_bytes(plan);
  compare_rows_bits(report, "recv_x", q, sources, expected_x.data(), expected_x.size() / elem,
                    actual_x.data(), actual_x.size() / elem, elem, static_cast<std::size_t>(plan.hidden()));
  if (plan.num_scales() > 0) {
    compare_rows<float>(report, "recv_x_scales", q, sources, expected_scales, actual_scales,
                        static_cast<std::size_t>(plan.num_scales()));
  }
}

}  // namespace eps::dispatch::detail
