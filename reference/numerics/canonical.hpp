// Canonical order (docs/numerics.md 1.3): key descending, then index ascending. -inf sorts last; NaN is an
// input error that callers reject before ordering (see `first_nan`): every helper below has "no key is NaN"
// as its precondition, because NaN breaks the strict weak order the algorithms rely on.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
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

// canonical_topk: writes to out[0..m) the indices of the m canonical-first entries of `keys`, in canonical
// order (out[0] is the largest key, ties by lower index), where m = min(k, keys.size(), out.size()), and
// returns m. k = 0 writes nothing; k >= keys.size() is a full canonical sort.
// Cost O(n log m) time, no allocation: out[0..m) holds a heap whose root is the canonical-last kept index.
// Call as canonical_topk<float>(keys, k, out). keys.size() must fit in int.
template <typename Key>
std::size_t canonical_topk(std::span<const Key> keys, std::size_t k, std::span<int> out) {
  const std::size_t m = std::min({k, keys.size(), out.size()});
  if (m == 0) return 0;
  // With "less" = canonical_before, the max-heap root is the canonical-last index kept so far.
  const auto before = [keys](int a, int b) { return canonical_before(keys[a], a, keys[b], b); };
  int* heap = out.data();
  std::iota(heap, heap + m, 0);
  std::make_heap(heap, heap + m, before);
  for (std::size_t i = m; i < keys.size(); ++i) {
    // Index i is larger than every kept index, so it loses every tie: only a strictly larger key enters.
    if (keys[i] > keys[heap[0]]) {
      std::pop_heap(heap, heap + m, before);
      heap[m - 1] = static_cast<int>(i);
      std::push_heap(heap, heap + m, before);
    }
  }
  std::sort_heap(heap, heap + m, before);
  return m;
}

// canonical_sort: writes the permutation of [0, keys.size()) that lists `keys` in canonical order.
// Requires out.size() == keys.size(). Call as canonical_sort<float>(keys, out).
template <typename Key>
void canonical_sort(std::span<const Key> keys, std::span<int> out) {
  std::iota(out.begin(), out.end(), 0);
  std::sort(out.begin(), out.end(),
            [keys](int a, int b) { return canonical_before(keys[a], a, keys[b], b); });
}

}  // namespace eps
