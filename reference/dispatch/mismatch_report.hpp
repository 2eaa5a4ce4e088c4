// Bit-exact comparison of an actual buffer with the expected one, for the conformance suite (docs/dispatch.md
// 5, docs/results.md 9.1 `check`). Independent of MPI: each rank compares its own buffers and the harness
// gathers the reports.
//
// A MismatchReport counts mismatches and keeps the first one as (field, rank, source rank, source token,
// column, expected bits, actual bits). Counting rules: one per differing element (column) of a row, one
// per differing scalar (count, index), one per structural fault (a size mismatch, an overlapping or
// missing LL block, an unexpected src_info entry). Elements are compared as bit patterns, so NaN == NaN
// only with identical payload and -0.0 != +0.0.
//
// compare_rows: `expected` and `actual` are [rows, row_width] arrays of one element type; `sources[i]`
// names the source (rank, token) of row i (or is empty: the source is reported as (-1, -1)). A length
// difference is one structural mismatch (column -1, bits = the two element counts) and the common
// prefix is still compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::dispatch {

struct Mismatch {
  std::string field;         // e.g. "recv_x", "packed_recv_count", "layout_range"
  int rank = -1;             // the rank whose buffer is checked
  int src_rank = -1;         // source rank of the row (-1 when not a row or unknown)
  int src_token = -1;        // source token of the row (-1 when not a row or unknown)
  std::int64_t column = -1;  // element index in the row (or in the array); -1 for a structural fault
  std::uint64_t expected_bits = 0;
  std::uint64_t actual_bits = 0;
  std::string note;  // extra words for structural faults, empty otherwise
};

class MismatchReport {
 public:
  void add(Mismatch mismatch);
  void merge(const MismatchReport& other);
  bool ok() const { return mismatches_ == 0; }
  std::int64_t mismatches() const { return mismatches_; }
  const std::optional<Mismatch>& first() const { return first_; }
  // "ok" or "<n> mismatches; first: recv_x rank 1 src (0, 2) column 5: expected 0x3f80 actual 0x3f81".
  std::string to_string() const;

 private:
  std::int64_t mismatches_ = 0;
  std::optional<Mismatch> first_;
};

// Compares element bit patterns; element_bytes is 1, 2, 4 or 8. Sizes are in elements.
void compare_rows_bits(MismatchReport& report, std::string_view field, int rank,
                       std::span<const SourceToken> sources, const void* expected, std::size_t expected_elems,
                       const void* actual, std::size_t actual_elems, std::size_t element_bytes,
                       std::size_t row_width);

template <typename T>
void compare_rows(MismatchReport& report, std::string_view field, int rank,
                  std::span<const SourceToken> sources, std::span<const T> expected,
                  std::span<const T> actual, std::size_t row_width) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  compare_rows_bits(report, field, rank, sources, expected.data(), expected.size(), actual.data(),
                    actual.size(), sizeof(T), row_width);
}

// A flat array whose index is the column (counts, ranges): no source.
template <typename T>
void compare_array(MismatchReport& report, std::string_view field, int rank, std::span<const T> expected,
                   std::span<const T> actual) {
  compare_rows<T>(report, field, rank, {}, expected, actual, expected.empty() ? 1 : expected.size());
}

}  // namespace eps::dispatch
