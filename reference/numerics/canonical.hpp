// Canonical order (SPEC 1.3): key descending, then index ascending. -inf sorts last; NaN is an input
// error that callers reject before ordering (see `first_nan`).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "reference/common/host_device.hpp"

namespace eps {

// True when (key_a, index_a) comes before (key_b, index_b) in canonical order. Keys must not be NaN.
template <typename Key, typename Index>
EPS_HD constexpr bool canonical_before(Key key_a, Index index_a, Key key_b, Index index_b) {
  return key_a > key_b || (key_a == key_b && index_a < index_b);
}

// Position of the first NaN in `values`, if any.
template <typename T>
std::optional<std::size_t> first_nan(std::span<const T> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) return i;
  }
  return std::nullopt;
}

}  // namespace eps
