#include "reference/dispatch/mismatch_report.hpp"

#include <algorithm>

namespace eps::dispatch {
namespace {

std::uint64_t load_bits(const void* base, std::size_t index, std::size_t element_bytes) {
  std::uint64_t bits = 0;  // little-endian hosts: the low bytes hold the element
  std::memcpy(&bits, static_cast<const std::byte*>(base) + index * element_bytes, element_bytes);
  return bits;
}

}  // namespace

void MismatchReport::add(Mismatch mismatch) {
  if (!first_) first_ = std::move(mismatch);
  ++mismatches_;
}

void MismatchReport::merge(const MismatchReport& other) {
  if (!first_ && other.first_) first_ = other.first_;
  mismatches_ += other.mismatches_;
}

std::string MismatchReport::to_string() const {
  if (ok()) return "ok";
  const Mismatch& m = *first_;
  std::string text = fmt::format(
      "{} mismatches; first: {} rank {} src ({}, {}) column {}: expected {:#x} actual {:#x}", mismatches_,
      m.field, m.rank, m.src_rank, m.src_token, m.column, m.expected_bits, m.actual_bits);
  if (!m.note.empty()) text += " (" + m.note + ")";
  return text;
}

void compare_rows_bits(MismatchReport& report, std::string_view field, int rank,
                       std::span<const SourceToken> sources, const void* expected, std::size_t expected_elems,
                       const void* actual, std::size_t actual_elems, std::size_t element_bytes,
                       std::size_t row_width) {
  if (expected_elems != actual_elems) {
    report.add(Mismatch{std::string(field), rank, -1, -1, -1, expected_elems, actual_elems,
                        "element count differs"});
  }
  row_width = std::max<std::size_t>(row_width, 1);
  const std::size_t common = std::min(expected_elems, actual_elems);
  const auto* e_bytes = static_cast<const std::byte*>(expected);
  const auto* a_bytes = static_cast<const std::byte*>(actual);
  // Whole rows are compared with memcmp first; only a differing row is walked element by element.
  for (std::size_t begin = 0; begin < common; begin += row_width) {
    const std::size_t end = std::min(begin + row_width, common);
    const std::size_t bytes = (end - begin) * element_bytes;
    if (std::memcmp(e_bytes + begin * element_bytes, a_bytes + begin * element_bytes, bytes) == 0) continue;
    const std::size_t row = begin / row_width;
    const SourceToken src = row < sources.size() ? sources[row] : SourceToken{};
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t e = load_bits(expected, i, element_bytes);
      const std::uint64_t a = load_bits(actual, i, element_bytes);
      if (e == a) continue;
      report.add(Mismatch{
          std::string(field), rank, src.rank, src.token, static_cast<std::int64_t>(i - begin), e, a, {}});
    }
  }
}

}  // namespace eps::dispatch
