#include "reference/dispatch/row_source.hpp"

#include <algorithm>
#include <cassert>

namespace eps::dispatch {

Result<MaterializedRowSource> MaterializedRowSource::make(PayloadType dtype, int hidden,
                                                          std::vector<std::vector<std::byte>> rows,
                                                          std::vector<std::vector<float>> scales) {
  if (hidden < 1 || hidden > kMaxHidden) return out_of_range("hidden", 1, kMaxHidden, hidden);
  if (dtype == PayloadType::kFp8 && hidden % kFp8GroupSize != 0) {
    return invalid_argument("hidden",
                            "must be a multiple of {} for fp8 payloads (docs/numerics.md 1.2), got {}",
                            kFp8GroupSize, hidden);
  }
  if (scales.size() != rows.size()) {
    return invalid_argument("scales", "must have one entry per rank ({}), got {}", rows.size(),
                            scales.size());
  }
  MaterializedRowSource source;
  source.row_bytes_ = payload_row_bytes(dtype, hidden);
  source.num_scales_ = static_cast<std::size_t>(payload_num_scales(dtype, hidden));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() % source.row_bytes_ != 0) {
      return invalid_argument(fmt::format("rows[{}]", r),
                              "size must be a multiple of the row size {}, got {}", source.row_bytes_,
                              rows[r].size());
    }
    const std::size_t expected_scales = rows[r].size() / source.row_bytes_ * source.num_scales_;
    if (scales[r].size() != expected_scales) {
      return invalid_argument(fmt::format("scales[{}]", r), "size must be num_tokens * H/128 = {}, got {}",
                              expected_scales, scales[r].size());
    }
  }
  source.rows_ = std::move(rows);
  source.scales_ = std::move(scales);
  return source;
}

void MaterializedRowSource::fill_row(int rank, int token, std::span<std::byte> row) const {
  assert(row.size() == row_bytes_);
  const auto begin = rows_[rank].begin() + static_cast<std::ptrdiff_t>(token * row_bytes_);
  std::copy(begin, begin + static_cast<std::ptrdiff_t>(row_bytes_), row.begin());
}

void MaterializedRowSource::fill_scales(int rank, int token, std::span<float> scales) const {
  assert(scales.size() == num_scales_);
  const auto begin = scales_[rank].begin() + static_cast<std::ptrdiff_t>(token * num_scales_);
  std::copy(begin, begin + static_cast<std::ptrdiff_t>(num_scales_), scales.begin());
}

}  // namespace eps::dispatch
