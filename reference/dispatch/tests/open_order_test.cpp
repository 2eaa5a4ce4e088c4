// The open-order checks of the HT layouts (SPEC 14.3, docs/dispatch.md 5.9): rows permuted inside their
// block pass, and only there; a row moved to another block, a row whose metadata travelled with another
// row, a repeated row, misplaced padding and a wrong row count are caught. The fixed-order checks reject the
// permuted layouts that the open ones accept.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/open_order.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

constexpr int kRank = 1;

// Rows [begin, end) of each array reversed (each array of `widths[i]` elements per row).
template <typename T>
void reverse_rows(std::vector<T>& values, std::size_t width, std::size_t begin, std::size_t end) {
  for (std::size_t lo = begin, hi = end; lo + 1 < hi; ++lo, --hi) {
    std::swap_ranges(values.begin() + static_cast<std::ptrdiff_t>(lo * width),
                     values.begin() + static_cast<std::ptrdiff_t>((lo + 1) * width),
                     values.begin() + static_cast<std::ptrdiff_t>((hi - 1) * width));
  }
}

template <typename T>
void swap_rows(std::vector<T>& values, std::size_t width, std::size_t a, std::size_t b) {
  std::swap_ranges(values.begin() + static_cast<std::ptrdiff_t>(a * width),
                   values.begin() + static_cast<std::ptrdiff_t>((a + 1) * width),
                   values.begin() + static_cast<std::ptrdiff_t>(b * width));
}

class OpenOrderTest : public ::testing::Test {
 protected:
  void make(int alignment) {
    std::mt19937 rng(11);
    config_ = {.num_ranks = 3,
               .num_experts = 6,
               .top_k = 3,
               .hidden = 128,
               .max_tokens_per_rank = 6,
               .dtype = PayloadType::kFp8,
               .expert_alignment = alignment};
    plan_.emplace(
        value_or_throw(DispatchPlan::make(config_, testing::random_routing(rng, 3, 6, 3, 6, 0.2, true))));
    source_.emplace(plan_->row_bytes(), plan_->num_scales());
  }

  std::size_t row_bytes() const { return plan_->row_bytes(); }
  std::size_t scales() const { return static_cast<std::size_t>(plan_->num_scales()); }
  std::size_t top_k() const { return static_cast<std::size_t>(config_.top_k); }

  // Rank-major: the received arrays, permuted by the test.
  struct RankMajor {
    std::vector<std::byte> x;
    std::vector<float> scales;
    std::vector<int> idx;
    std::vector<float> weights;
    std::vector<int> counts;
    RankMajorView view() const { return {x, scales, idx, weights, counts}; }
    void reverse(const OpenOrderTest& t, std::size_t begin, std::size_t end) {
      reverse_rows(x, t.row_bytes(), begin, end);
      reverse_rows(scales, t.scales(), begin, end);
      reverse_rows(idx, t.top_k(), begin, end);
      reverse_rows(weights, t.top_k(), begin, end);
    }
    void swap(const OpenOrderTest& t, std::size_t a, std::size_t b) {
      swap_rows(x, t.row_bytes(), a, b);
      swap_rows(scales, t.scales(), a, b);
      swap_rows(idx, t.top_k(), a, b);
      swap_rows(weights, t.top_k(), a, b);
    }
  };

  RankMajorExpected rank_major_expected() const {
    return value_or_throw(expected_rank_major(*plan_, kRank, *source_));
  }
  static RankMajor received(const RankMajorExpected& e) {
    return {e.recv_x, e.recv_x_scales, e.index.recv_topk_idx, e.index.recv_topk_weights,
            e.index.num_recv_tokens_per_expert};
  }
  // [begin, end) of each source rank's block in the expected rows.
  static std::vector<std::pair<std::size_t, std::size_t>> blocks(const RankMajorIndex& index) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < index.sources.size(); ++i) {
      if (i == 0 || index.sources[i].rank != index.sources[i - 1].rank) out.push_back({i, i});
      out.back().second = i + 1;
    }
    return out;
  }

  DispatchConfig config_;
  std::optional<DispatchPlan> plan_;
  std::optional<testing::HashRowSource> source_;
};

TEST_F(OpenOrderTest, RankMajorRowsPermutedInsideBlocksPassOnlyWhenOpen) {
  make(1);
  const RankMajorExpected e = rank_major_expected();
  RankMajor actual = received(e);
  EXPECT_TRUE(compare_rank_major_open(*plan_, e, actual.view()).ok());
  for (const auto& [begin, end] : blocks(e.index)) actual.reverse(*this, begin, end);
  ASSERT_NE(actual.x, e.recv_x);  // the workload must make the permutation visible
  const MismatchReport open = compare_rank_major_open(*plan_, e, actual.view());
  EXPECT_TRUE(open.ok()) << open.to_string();
  EXPECT_FALSE(compare_rank_major(*plan_, e, actual.view()).ok());
}

TEST_F(OpenOrderTest, RankMajorRowMovedToAnotherBlockIsCaught) {
  make(1);
  const RankMajorExpected e = rank_major_expected();
  const auto b = blocks(e.index);
  ASSERT_GE(b.size(), 2u);
  RankMajor actual = received(e);
  actual.swap(*this, b[0].first, b[1].first);  // one row of each of two blocks changes places
  const MismatchReport report = compare_rank_major_open(*plan_, e, actual.view());
  EXPECT_EQ(report.mismatches(), 4) << report.to_string();  // per block: one stray row, one missing
  ASSERT_TRUE(report.first().has_value());
  EXPECT_EQ(report.first()->field, "recv_x");
  EXPECT_NE(report.first()->note.find("matches no expected row of the block of source rank"),
            std::string::npos)
      << report.to_string();
}

TEST_F(OpenOrderTest, RankMajorMetadataSwappedBetweenRowsIsCaught) {
  make(1);
  const RankMajorExpected e = rank_major_expected();
  RankMajor actual = received(e);
  // Two rows of one block keep their payloads but exchange their weights: the multiset of payloads is right,
  // the rows are not.
  const auto b = blocks(e.index);
  const auto block = std::find_if(b.begin(), b.end(), [&](const auto& range) {
    if (range.second - range.first < 2) return false;
    return !std::equal(e.index.recv_topk_weights.begin() + range.first * top_k(),
                       e.index.recv_topk_weights.begin() + (range.first + 1) * top_k(),
                       e.index.recv_topk_weights.begin() + (range.first + 1) * top_k());
  });
  ASSERT_NE(block, b.end());
  swap_rows(actual.weights, top_k(), block->first, block->first + 1);
  const MismatchReport report = compare_rank_major_open(*plan_, e, actual.view());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.first()->field, "recv_topk_weights") << report.to_string();
  EXPECT_EQ(report.first()->src_rank, e.index.sources[block->first].rank);
}

TEST_F(OpenOrderTest, RankMajorRepeatedRowAndWrongCountsAreCaught) {
  make(1);
  const RankMajorExpected e = rank_major_expected();
  RankMajor actual = received(e);
  const auto b = blocks(e.index);
  const auto block = std::find_if(b.begin(), b.end(), [](const auto& r) { return r.second - r.first >= 2; });
  ASSERT_NE(block, b.end());
  std::copy_n(actual.x.begin() + static_cast<std::ptrdiff_t>(block->first * row_bytes()), row_bytes(),
              actual.x.begin() + static_cast<std::ptrdiff_t>((block->first + 1) * row_bytes()));
  EXPECT_FALSE(compare_rank_major_open(*plan_, e, actual.view()).ok());

  RankMajor counted = received(e);
  counted.counts[0] += 1;
  const MismatchReport report = compare_rank_major_open(*plan_, e, counted.view());
  EXPECT_EQ(report.mismatches(), 1);
  EXPECT_EQ(report.first()->field, "num_recv_tokens_per_expert");
}

TEST_F(OpenOrderTest, RankMajorRowCountIsCompared) {
  make(1);
  const RankMajorExpected e = rank_major_expected();
  RankMajor actual = received(e);
  actual.x.resize(actual.x.size() - row_bytes());
  actual.scales.resize(actual.scales.size() - scales());
  actual.idx.resize(actual.idx.size() - top_k());
  actual.weights.resize(actual.weights.size() - top_k());
  const MismatchReport report = compare_rank_major_open(*plan_, e, actual.view());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.first()->note, "row count differs");
}

class ExpertMajorOpenTest : public OpenOrderTest {
 protected:
  struct ExpertMajor {
    std::vector<std::byte> x;
    std::vector<float> scales;
    std::vector<float> weights;
    ExpertMajorView view() const { return {x, scales, weights}; }
  };
  ExpertMajorExpected expected() const {
    return value_or_throw(expected_expert_major(*plan_, kRank, *source_));
  }
  static ExpertMajor received(const ExpertMajorExpected& e) {
    std::vector<float> weights;
    for (const ExpertMajorRow& row : e.index.rows) weights.push_back(row.weight);
    return {e.recv_x, e.recv_x_scales, weights};
  }
  void reverse(ExpertMajor& m, std::size_t begin, std::size_t end) const {
    reverse_rows(m.x, row_bytes(), begin, end);
    reverse_rows(m.scales, scales(), begin, end);
    reverse_rows(m.weights, 1, begin, end);
  }
};

TEST_F(ExpertMajorOpenTest, ValidRowsPermutedInsideSegmentsPassOnlyWhenOpen) {
  make(4);
  const ExpertMajorExpected e = expected();
  ExpertMajor actual = received(e);
  EXPECT_TRUE(compare_expert_major_open(*plan_, e, actual.view()).ok());
  for (std::size_t l = 0; l < e.index.counts.size(); ++l) {
    const auto begin = static_cast<std::size_t>(e.index.segment_begin[l]);
    reverse(actual, begin, begin + static_cast<std::size_t>(e.index.counts[l]));
  }
  ASSERT_NE(actual.x, e.recv_x);
  const MismatchReport open = compare_expert_major_open(*plan_, e, actual.view());
  EXPECT_TRUE(open.ok()) << open.to_string();
  EXPECT_FALSE(compare_expert_major(*plan_, e, actual.view()).ok());
}

TEST_F(ExpertMajorOpenTest, PaddingBeforeValidRowsIsCaught) {
  make(4);
  const ExpertMajorExpected e = expected();
  // A segment with padding: reversing all of it puts the padding first.
  std::size_t l = 0;
  while (l < e.index.counts.size() &&
         (e.index.segment_begin[l + 1] - e.index.segment_begin[l] == e.index.counts[l] ||
          e.index.counts[l] == 0))
    ++l;
  ASSERT_LT(l, e.index.counts.size()) << "the workload has no padded segment";
  ExpertMajor actual = received(e);
  reverse(actual, static_cast<std::size_t>(e.index.segment_begin[l]),
          static_cast<std::size_t>(e.index.segment_begin[l + 1]));
  const MismatchReport report = compare_expert_major_open(*plan_, e, actual.view());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.first()->field, "recv_x");
}

TEST_F(ExpertMajorOpenTest, RowOfAnotherExpertIsCaught) {
  make(1);
  const ExpertMajorExpected e = expected();
  ASSERT_GE(e.index.counts.size(), 2u);
  ASSERT_GT(e.index.counts[0], 0);
  ASSERT_GT(e.index.counts[1], 0);
  ExpertMajor actual = received(e);
  const auto a = static_cast<std::size_t>(e.index.segment_begin[0]);
  const auto b = static_cast<std::size_t>(e.index.segment_begin[1]);
  swap_rows(actual.x, row_bytes(), a, b);
  swap_rows(actual.scales, scales(), a, b);
  swap_rows(actual.weights, 1, a, b);
  // The same token may have slots on both experts: then only its weight tells the rows apart, or nothing
  // does when the weights are equal too; this workload's first rows differ.
  ASSERT_NE(std::vector<std::byte>(e.recv_x.begin() + static_cast<std::ptrdiff_t>(a * row_bytes()),
                                   e.recv_x.begin() + static_cast<std::ptrdiff_t>((a + 1) * row_bytes())),
            std::vector<std::byte>(e.recv_x.begin() + static_cast<std::ptrdiff_t>(b * row_bytes()),
                                   e.recv_x.begin() + static_cast<std::ptrdiff_t>((b + 1) * row_bytes())));
  const MismatchReport report = compare_expert_major_open(*plan_, e, actual.view());
  EXPECT_EQ(report.mismatches(), 4) << report.to_string();
}

}  // namespace
}  // namespace eps::dispatch
