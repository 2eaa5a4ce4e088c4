// The LL layout checker (docs/dispatch.md 5.4): it accepts the canonical layout and any valid permutation of
// it (unordered backends), ignores don't-care rows, and rejects wrong rows, overlapping blocks and missing
// rows.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

// An LL layout a transport might return, owned by the test.
struct Packed {
  std::vector<std::byte> x;
  std::vector<float> scales;
  std::vector<int> count;
  std::vector<int> src_info;
  std::vector<LlRange> range;
  LlView view() const { return {x, scales, count, src_info, range}; }
};

class LlCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(7);
    config_ = {.num_ranks = 3,
               .num_experts = 6,
               .top_k = 3,
               .hidden = 128,
               .max_tokens_per_rank = 5,
               .dtype = PayloadType::kFp8};
    plan_.emplace(
        value_or_throw(DispatchPlan::make(config_, testing::random_routing(rng, 3, 6, 3, 5, 0.2, true))));
    source_.emplace(plan_->row_bytes(), plan_->num_scales());
    const LlExpected e = value_or_throw(expected_ll(*plan_, kRank, *source_));
    canonical_ = {e.packed_recv_x, e.packed_recv_x_scales, e.index.packed_recv_count, e.index.src_info,
                  e.index.layout_range};
    capacity_ = static_cast<std::size_t>(e.index.capacity);
  }

  MismatchReport check(const Packed& p, LlOrder order) const {
    return value_or_throw(check_ll_dispatch(*plan_, kRank, *source_, p.view(), order));
  }

  std::size_t row_bytes() const { return plan_->row_bytes(); }
  std::size_t num_scales() const { return static_cast<std::size_t>(plan_->num_scales()); }

  void copy_row(const Packed& from, std::size_t from_row, Packed& to, std::size_t to_row) const {
    std::copy_n(from.x.begin() + from_row * row_bytes(), row_bytes(), to.x.begin() + to_row * row_bytes());
    std::copy_n(from.scales.begin() + from_row * num_scales(), num_scales(),
                to.scales.begin() + to_row * num_scales());
    to.src_info[to_row] = from.src_info[from_row];
  }

  // Blocks in descending source rank, rows reversed inside each block (unless keep_row_order): valid
  // but not canonical.
  Packed permuted(bool keep_row_order = false) const {
    Packed p = canonical_;
    const int num_ranks = config_.num_ranks;
    for (int l = 0; l < plan_->num_local_experts(); ++l) {
      int next = 0;
      for (int r = num_ranks - 1; r >= 0; --r) {
        const LlRange old = canonical_.range[static_cast<std::size_t>(l) * num_ranks + r];
        for (int i = 0; i < old.count; ++i) {
          const int from = keep_row_order ? old.begin + i : old.begin + old.count - 1 - i;
          copy_row(canonical_, l * capacity_ + static_cast<std::size_t>(from), p,
                   l * capacity_ + static_cast<std::size_t>(next + i));
        }
        p.range[static_cast<std::size_t>(l) * num_ranks + r] = {next, old.count};
        next += old.count;
      }
    }
    return p;
  }

  // Local expert with at least two non-empty blocks, and one with a block of at least two rows.
  int expert_with_blocks(int min_blocks, int min_rows) const {
    for (int l = 0; l < plan_->num_local_experts(); ++l) {
      int blocks = 0;
      for (int r = 0; r < config_.num_ranks; ++r) {
        if (canonical_.range[static_cast<std::size_t>(l) * config_.num_ranks + r].count >= min_rows) ++blocks;
      }
      if (blocks >= min_blocks) return l;
    }
    ADD_FAILURE() << "workload has no suitable expert";
    return 0;
  }

  static constexpr int kRank = 1;
  DispatchConfig config_;
  std::optional<DispatchPlan> plan_;
  std::optional<testing::HashRowSource> source_;
  Packed canonical_;
  std::size_t capacity_ = 0;
};

TEST_F(LlCheckerTest, AcceptsCanonicalLayoutInBothModes) {
  EXPECT_TRUE(check(canonical_, LlOrder::kOrdered).ok()) << check(canonical_, LlOrder::kOrdered).to_string();
  EXPECT_TRUE(check(canonical_, LlOrder::kUnordered).ok());
}

TEST_F(LlCheckerTest, AcceptsPermutedLayoutOnlyWhenUnordered) {
  const Packed p = permuted();
  ASSERT_NE(p.src_info, canonical_.src_info);  // the workload must make the permutation visible
  EXPECT_TRUE(check(p, LlOrder::kUnordered).ok()) << check(p, LlOrder::kUnordered).to_string();
  EXPECT_FALSE(check(p, LlOrder::kOrdered).ok());
}

TEST_F(LlCheckerTest, OrderedModeRejectsBlocksOutOfRankOrder) {
  // Rows ascending inside each block, but blocks in descending source rank.
  const Packed p = permuted(/*keep_row_order=*/true);
  ASSERT_NE(p.range, canonical_.range);
  EXPECT_TRUE(check(p, LlOrder::kUnordered).ok());
  const MismatchReport report = check(p, LlOrder::kOrdered);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.first()->field, "layout_range");
  EXPECT_EQ(report.first()->note, "block begin (ordered)");
}

TEST_F(LlCheckerTest, IgnoresDontCareRows) {
  Packed p = permuted();
  for (int l = 0; l < plan_->num_local_experts(); ++l) {
    for (std::size_t i = static_cast<std::size_t>(p.count[l]); i < capacity_; ++i) {
      p.src_info[l * capacity_ + i] = 12345;
      p.x[(l * capacity_ + i) * row_bytes()] = std::byte{0x7f};
    }
  }
  EXPECT_TRUE(check(p, LlOrder::kUnordered).ok());
}

TEST_F(LlCheckerTest, RejectsWrongPayloadByte) {
  Packed p = permuted();
  const int l = expert_with_blocks(1, 1);
  const std::size_t row = l * capacity_;
  p.x[row * row_bytes() + 5] ^= std::byte{1};
  const MismatchReport report = check(p, LlOrder::kUnordered);
  EXPECT_EQ(report.mismatches(), 1);
  ASSERT_TRUE(report.first().has_value());
  EXPECT_EQ(report.first()->field, "packed_recv_x");
  EXPECT_EQ(report.first()->rank, kRank);
  EXPECT_EQ(report.first()->src_token, p.src_info[row]);
  EXPECT_EQ(report.first()->column, 5);
}

TEST_F(LlCheckerTest, RejectsChangedScale) {
  Packed p = canonical_;
  const int l = expert_with_blocks(1, 1);
  p.scales[l * capacity_ * num_scales()] = -p.scales[l * capacity_ * num_scales()];
  const MismatchReport report = check(p, LlOrder::kOrdered);
  EXPECT_EQ(report.mismatches(), 1);
  EXPECT_EQ(report.first()->field, "packed_recv_x_scales");
}

TEST_F(LlCheckerTest, RejectsRowFromWrongSourceToken) {
  // Point one src_info at another token of the same source rank that is not in the block.
  Packed p = permuted();
  const int l = expert_with_blocks(1, 1);
  const std::size_t row = l * capacity_;
  p.src_info[row] = config_.max_tokens_per_rank + 3;
  const MismatchReport report = check(p, LlOrder::kUnordered);
  EXPECT_EQ(report.mismatches(), 2);  // an unexpected token, and the displaced one missing
  EXPECT_EQ(report.first()->field, "src_info");
  EXPECT_EQ(report.first()->note, "token not expected in block");
}

TEST_F(LlCheckerTest, RejectsOverlappingBlocks) {
  // In the canonical layout, move the block of the higher source rank r2 onto the rows of r1 < r2. It
  // still lies inside [0, count), so the first fault the checker meets (blocks are visited in ascending
  // r) is the overlap; the rows r2 left behind are then not covered.
  Packed p = canonical_;
  const int l = expert_with_blocks(2, 1);
  std::vector<int> ranks;
  for (int r = 0; r < config_.num_ranks; ++r) {
    if (p.range[static_cast<std::size_t>(l) * config_.num_ranks + r].count > 0) ranks.push_back(r);
  }
  p.range[static_cast<std::size_t>(l) * config_.num_ranks + ranks[1]].begin =
      p.range[static_cast<std::size_t>(l) * config_.num_ranks + ranks[0]].begin;
  const MismatchReport report = check(p, LlOrder::kUnordered);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.first()->field, "layout_range");
  EXPECT_EQ(report.first()->src_rank, ranks[1]);
  EXPECT_NE(report.first()->note.find("overlaps the block of source rank " + std::to_string(ranks[0])),
            std::string::npos)
      << report.to_string();
}

TEST_F(LlCheckerTest, RejectsMissingRow) {
  Packed p = permuted();
  const int l = expert_with_blocks(1, 2);
  // Drop the last row of a block of at least 2 rows: shorten the block and the expert count.
  for (int r = 0; r < config_.num_ranks; ++r) {
    LlRange& range = p.range[static_cast<std::size_t>(l) * config_.num_ranks + r];
    if (range.count < 2) continue;
    // Shift later blocks down by one so the layout stays contiguous.
    const int end = range.begin + range.count;
    for (int i = end; i < p.count[l]; ++i) copy_row(p, l * capacity_ + i, p, l * capacity_ + i - 1);
    for (int s = 0; s < config_.num_ranks; ++s) {
      LlRange& other = p.range[static_cast<std::size_t>(l) * config_.num_ranks + s];
      if (other.count > 0 && other.begin >= end) --other.begin;
    }
    --range.count;
    --p.count[l];
    break;
  }
  const MismatchReport report = check(p, LlOrder::kUnordered);
  // packed_recv_count, the block count and the missing token.
  EXPECT_EQ(report.mismatches(), 3) << report.to_string();
  EXPECT_EQ(report.first()->field, "packed_recv_count");
  EXPECT_EQ(report.first()->column, l);
}

TEST_F(LlCheckerTest, RejectsViewOfTheWrongShape) {
  Packed p = canonical_;
  p.src_info.pop_back();
  const auto result = check_ll_dispatch(*plan_, kRank, *source_, p.view(), LlOrder::kUnordered);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "src_info: size must be " +
                                           std::to_string(canonical_.src_info.size()) + ", got " +
                                           std::to_string(p.src_info.size()));
}

}  // namespace
}  // namespace eps::dispatch
