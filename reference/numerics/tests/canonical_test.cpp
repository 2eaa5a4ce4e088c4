// docs/numerics.md 1.3: canonical order is key descending, then index ascending; -inf sorts last.
#include "reference/numerics/canonical.hpp"

#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace eps {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<int> topk(const std::vector<float>& keys, std::size_t k) {
  std::vector<int> out(k, -7);
  const std::size_t m = canonical_topk<float>(keys, k, out);
  out.resize(m);
  return out;
}

// Oracle: stable sort by key descending keeps equal keys in ascending index order.
std::vector<int> oracle_order(const std::vector<float>& keys) {
  std::vector<int> idx(keys.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return static_cast<double>(keys[a]) > static_cast<double>(keys[b]); });
  return idx;
}

TEST(CanonicalBefore, KeyThenIndex) {
  EXPECT_TRUE(canonical_before(2.0f, 5, 1.0f, 0));
  EXPECT_FALSE(canonical_before(1.0f, 0, 2.0f, 5));
  EXPECT_TRUE(canonical_before(1.0f, 2, 1.0f, 3));
  EXPECT_FALSE(canonical_before(1.0f, 3, 1.0f, 2));
  EXPECT_FALSE(canonical_before(1.0f, 3, 1.0f, 3));
  EXPECT_TRUE(canonical_before(-kInf, 9, -kInf, 10));
  EXPECT_TRUE(canonical_before(-1e30f, 9, -kInf, 0));
}

TEST(FirstNan, FindsFirst) {
  const std::vector<float> none = {1.0f, -kInf, kInf};
  EXPECT_FALSE(first_nan<float>(none).has_value());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> two = {0.0f, nan, 1.0f, nan};
  EXPECT_EQ(first_nan<float>(two), std::optional<std::size_t>(1));
}

TEST(CanonicalTopk, TiesGoToLowerIndex) {
  // Keys 3 at indices 1, 3, 4; 5 at 2; 1 at 0.
  const std::vector<float> keys = {1.0f, 3.0f, 5.0f, 3.0f, 3.0f};
  EXPECT_EQ(topk(keys, 1), (std::vector<int>{2}));
  EXPECT_EQ(topk(keys, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(topk(keys, 3), (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(topk(keys, 4), (std::vector<int>{2, 1, 3, 4}));
}

TEST(CanonicalTopk, AllEqualKeysSelectLowestIndices) {
  const std::vector<float> keys(9, 0.25f);
  EXPECT_EQ(topk(keys, 4), (std::vector<int>{0, 1, 2, 3}));
}

TEST(CanonicalTopk, NegativeInfinitySortsLast) {
  const std::vector<float> keys = {-kInf, -1e30f, -kInf, 0.0f, -kInf};
  EXPECT_EQ(topk(keys, 2), (std::vector<int>{3, 1}));
  // -inf entries are still selected when k needs them, lower index first.
  EXPECT_EQ(topk(keys, 4), (std::vector<int>{3, 1, 0, 2}));
  EXPECT_EQ(topk(keys, 5), (std::vector<int>{3, 1, 0, 2, 4}));
}

TEST(CanonicalTopk, KZeroWritesNothing) {
  const std::vector<float> keys = {1.0f, 2.0f};
  std::vector<int> out = {-7, -7};
  EXPECT_EQ(canonical_topk<float>(keys, 0, out), 0u);
  EXPECT_EQ(out, (std::vector<int>{-7, -7}));
}

TEST(CanonicalTopk, KEqualsNIsFullSort) {
  const std::vector<float> keys = {0.5f, -kInf, 2.0f, 0.5f, 7.0f, -3.0f};
  EXPECT_EQ(topk(keys, keys.size()), (std::vector<int>{4, 2, 0, 3, 5, 1}));
  // k larger than n is clamped to n.
  EXPECT_EQ(topk(keys, 10), (std::vector<int>{4, 2, 0, 3, 5, 1}));
}

TEST(CanonicalTopk, EmptyKeys) {
  std::vector<int> out(3, -7);
  EXPECT_EQ(canonical_topk<float>(std::span<const float>(), 3, out), 0u);
}

TEST(CanonicalTopk, MatchesStableSortOracleOnRandomKeysWithTies) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> level(-6, 6);  // few distinct values: many ties
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + trial % 67;
    std::vector<float> keys(n);
    for (auto& key : keys) {
      const int v = level(rng);
      key = v == -6 ? -kInf : static_cast<float>(v) * 0.5f;
    }
    const std::vector<int> expected = oracle_order(keys);
    for (std::size_t k : {std::size_t{1}, std::size_t{3}, n / 2, n}) {
      const std::vector<int> got = topk(keys, k);
      ASSERT_EQ(got, std::vector<int>(expected.begin(), expected.begin() + std::min(k, n)))
          << "trial " << trial << " k " << k;
    }
  }
}

TEST(CanonicalSort, MatchesOracle) {
  const std::vector<float> keys = {2.0f, -kInf, 2.0f, 9.0f, -kInf, 0.0f, -0.0f};
  std::vector<int> out(keys.size());
  canonical_sort<float>(keys, out);
  // 0.0f == -0.0f compare equal, so they tie and keep index order.
  EXPECT_EQ(out, (std::vector<int>{3, 0, 2, 5, 6, 1, 4}));
  EXPECT_EQ(out, oracle_order(keys));
}

TEST(CanonicalSort, DoubleKeys) {
  const std::vector<double> keys = {1.0, 1.0 + 1e-15, 1.0};
  std::vector<int> out(keys.size());
  canonical_sort<double>(keys, out);
  EXPECT_EQ(out, (std::vector<int>{1, 0, 2}));
}

}  // namespace
}  // namespace eps
