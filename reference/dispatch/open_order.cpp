#include "reference/dispatch/open_order.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "reference/dispatch/detail.hpp"

namespace eps::dispatch {
namespace {

// One array of a layout as rows of `row_bytes` bytes, expected and actual side by side.
struct Field {
  std::string_view name;
  std::size_t row_bytes = 0;
  std::size_t element_bytes = 1;  // what a column is: 1 (fp8 codes), 2 (bf16), 4 (int, float)
  std::span<const std::byte> expected;
  std::span<const std::byte> actual;

  std::size_t actual_rows() const { return row_bytes == 0 ? 0 : actual.size() / row_bytes; }
};

// An array of `row_elements` elements of T per row.
template <typename T>
Field field(std::string_view name, std::size_t row_elements, std::span<const T> expected,
            std::span<const T> actual) {
  return {name, row_elements * sizeof(T), sizeof(T), std::as_bytes(expected), std::as_bytes(actual)};
}

// Compares blocks of rows as multisets (open_order.hpp). Rows are named by their index in the arrays.
class BlockMatcher {
 public:
  BlockMatcher(std::vector<Field> fields, int rank, std::span<const SourceToken> sources,
               MismatchReport& report)
      : fields_(std::move(fields)), rank_(rank), sources_(sources), report_(report) {}

  // The rows both sides hold (a count difference is reported here, once).
  std::size_t common_rows(std::size_t expected_rows) const {
    std::size_t rows = expected_rows;
    for (const Field& f : fields_) rows = std::min(rows, f.actual_rows());
    if (rows != expected_rows || fields_.front().actual_rows() != expected_rows) {
      report_.add({std::string(fields_.front().name), rank_, -1, -1, -1, expected_rows,
                   fields_.front().actual_rows(), "row count differs"});
    }
    return rows;
  }

  // Rows [begin, end) of both sides as multisets; `block` names the block in messages.
  void compare_block(std::size_t begin, std::size_t end, int src_rank, const std::string& block) {
    const std::vector<std::size_t> expected = sorted_rows(false, begin, end);
    const std::vector<std::size_t> actual = sorted_rows(true, begin, end);
    std::vector<std::size_t> lost, stray;  // expected rows nobody matched, received rows matching none
    std::size_t e = 0, a = 0;
    while (e < expected.size() && a < actual.size()) {
      const int c = order(false, expected[e], true, actual[a], fields_.size());
      if (c == 0) {
        ++e;
        ++a;
      } else if (c < 0) {
        lost.push_back(expected[e++]);
      } else {
        stray.push_back(actual[a++]);
      }
    }
    lost.insert(lost.end(), expected.begin() + static_cast<std::ptrdiff_t>(e), expected.end());
    stray.insert(stray.end(), actual.begin() + static_cast<std::ptrdiff_t>(a), actual.end());
    report_unmatched(std::move(lost), std::move(stray), src_rank, block);
  }

  // Rows [begin, end) compared in place (padding).
  void compare_in_place(std::size_t begin, std::size_t end) {
    for (const Field& f : fields_) {
      const std::size_t columns = f.row_bytes / f.element_bytes;
      compare_rows_bits(report_, f.name, rank_, sources_.subspan(begin, end - begin),
                        f.expected.data() + begin * f.row_bytes, (end - begin) * columns,
                        f.actual.data() + begin * f.row_bytes, (end - begin) * columns, f.element_bytes,
                        columns);
    }
  }

 private:
  const std::byte* row(const Field& f, bool actual, std::size_t i) const {
    return (actual ? f.actual : f.expected).data() + i * f.row_bytes;
  }

  // Lexicographic order of the first `num_fields` arrays of row i (of one side) and row j (of the other).
  int order(bool actual_i, std::size_t i, bool actual_j, std::size_t j, std::size_t num_fields) const {
    for (std::size_t f = 0; f < num_fields; ++f) {
      const int c =
          std::memcmp(row(fields_[f], actual_i, i), row(fields_[f], actual_j, j), fields_[f].row_bytes);
      if (c != 0) return c;
    }
    return 0;
  }

  std::vector<std::size_t> sorted_rows(bool actual, std::size_t begin, std::size_t end) const {
    std::vector<std::size_t> rows(end - begin);
    std::iota(rows.begin(), rows.end(), begin);
    std::sort(rows.begin(), rows.end(),
              [&](std::size_t i, std::size_t j) { return order(actual, i, actual, j, fields_.size()) < 0; });
    return rows;
  }

  // A received row that matches nothing is compared column by column with a lost row of the same payload
  // (the first array), which names what differs; the rest are reported whole.
  void report_unmatched(std::vector<std::size_t> lost, std::vector<std::size_t> stray, int src_rank,
                        const std::string& block) {
    const auto by_payload = [&](std::size_t i, std::size_t j) { return order(false, i, false, j, 1) < 0; };
    std::sort(lost.begin(), lost.end(), by_payload);
    std::sort(stray.begin(), stray.end());
    std::vector<bool> paired(lost.size(), false);
    const Field& payload = fields_.front();
    for (std::size_t s : stray) {
      auto it = std::lower_bound(lost.begin(), lost.end(), s, [&](std::size_t l, std::size_t received) {
        return order(false, l, true, received, 1) < 0;
      });
      for (; it != lost.end() && order(false, *it, true, s, 1) == 0; ++it) {
        if (!paired[static_cast<std::size_t>(it - lost.begin())]) break;
      }
      if (it == lost.end() || order(false, *it, true, s, 1) != 0) {
        report_.add({std::string(payload.name), rank_, src_rank, -1, static_cast<std::int64_t>(s), 0, 0,
                     fmt::format("row {} matches no expected row of {} (open order)", s, block)});
        continue;
      }
      paired[static_cast<std::size_t>(it - lost.begin())] = true;
      for (const Field& f : fields_) {
        const std::size_t columns = f.row_bytes / f.element_bytes;
        compare_rows_bits(report_, f.name, rank_, sources_.subspan(*it, 1), row(f, false, *it), columns,
                          row(f, true, s), columns, f.element_bytes, columns);
      }
    }
    for (std::size_t i = 0; i < lost.size(); ++i) {
      if (paired[i]) continue;
      const SourceToken src = sources_[lost[i]];
      report_.add({std::string(payload.name), rank_, src.rank, src.token, -1, 0, 0,
                   fmt::format("expected row missing from {} (open order)", block)});
    }
  }

  std::vector<Field> fields_;
  int rank_;
  std::span<const SourceToken> sources_;
  MismatchReport& report_;
};

// The payload arrays of a layout: recv_x (columns are bf16 or fp8 elements) and, for fp8, its scales.
std::vector<Field> payload_fields(const DispatchPlan& plan, std::span<const std::byte> expected_x,
                                  std::span<const float> expected_scales, std::span<const std::byte> actual_x,
                                  std::span<const float> actual_scales) {
  std::vector<Field> fields{{"recv_x", plan.row_bytes(), detail::element_bytes(plan), expected_x, actual_x}};
  const auto num_scales = static_cast<std::size_t>(plan.num_scales());
  if (num_scales > 0)
    fields.push_back(field<float>("recv_x_scales", num_scales, expected_scales, actual_scales));
  return fields;
}

}  // namespace

MismatchReport compare_rank_major_open(const DispatchPlan& plan, const RankMajorExpected& expected,
                                       const RankMajorView& actual) {
  MismatchReport report;
  const RankMajorIndex& index = expected.index;
  const auto top_k = static_cast<std::size_t>(plan.top_k());
  std::vector<Field> fields =
      payload_fields(plan, expected.recv_x, expected.recv_x_scales, actual.recv_x, actual.recv_x_scales);
  fields.push_back(field<int>("recv_topk_idx", top_k, index.recv_topk_idx, actual.recv_topk_idx));
  fields.push_back(
      field<float>("recv_topk_weights", top_k, index.recv_topk_weights, actual.recv_topk_weights));
  BlockMatcher matcher(std::move(fields), index.rank, index.sources, report);
  const std::size_t rows = matcher.common_rows(index.num_rows());
  // The expected rows are sorted by (r, t), so each source rank's block is one run of them.
  for (std::size_t begin = 0; begin < rows;) {
    const int r = index.sources[begin].rank;
    std::size_t end = begin;
    while (end < index.num_rows() && index.sources[end].rank == r) ++end;
    if (end <= rows) matcher.compare_block(begin, end, r, fmt::format("the block of source rank {}", r));
    begin = end;
  }
  compare_array<int>(report, "num_recv_tokens_per_expert", index.rank, index.num_recv_tokens_per_expert,
                     actual.num_recv_tokens_per_expert);
  return report;
}

MismatchReport compare_expert_major_open(const DispatchPlan& plan, const ExpertMajorExpected& expected,
                                         const ExpertMajorView& actual) {
  MismatchReport report;
  const ExpertMajorIndex& index = expected.index;
  std::vector<float> weights;
  weights.reserve(index.rows.size());
  for (const ExpertMajorRow& row : index.rows) weights.push_back(row.weight);
  std::vector<Field> fields =
      payload_fields(plan, expected.recv_x, expected.recv_x_scales, actual.recv_x, actual.recv_x_scales);
  fields.push_back(field<float>("recv_weights", 1, weights, actual.recv_weights));
  const std::vector<SourceToken> sources = index.sources();
  BlockMatcher matcher(std::move(fields), index.rank, sources, report);
  const auto rows = matcher.common_rows(index.rows.size());
  for (std::size_t l = 0; l < index.counts.size(); ++l) {
    const auto begin = static_cast<std::size_t>(index.segment_begin[l]);
    const std::size_t valid_end = begin + static_cast<std::size_t>(index.counts[l]);
    const auto end = static_cast<std::size_t>(index.segment_begin[l + 1]);
    if (end > rows) break;
    matcher.compare_block(begin, valid_end, -1, fmt::format("local expert {}'s segment", l));
    matcher.compare_in_place(valid_end, end);  // padding after the valid rows
  }
  return report;
}

}  // namespace eps::dispatch
