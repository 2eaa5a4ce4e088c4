// The hand-computed case of reference/dispatch (docs/dispatch.md 5.1-5.5): R = 2, E = 4 (L = 2), K = 2, 3
// tokens per rank. Default placement: experts 0, 1 on rank 0 (local 0, 1), experts 2, 3 on rank 1 (local 0,
// 1).
//
//   rank 0  t0: experts [1, 2]   weights [0.5, 0.25]    dst {0, 1}
//           t1: experts [3, -1]  weights [1.0, 7.0]     dst {1}      (7.0 is a masked slot's garbage)
//           t2: experts [0, 1]   weights [0.75, 0.125]  dst {0}
//   rank 1  t0: experts [2, 0]   weights [0.375, 0.625] dst {0, 1}
//           t1: experts [-1, -1] weights [9.0, 9.0]     dst {}       (all masked)
//           t2: experts [3, 2]   weights [0.25, 0.5]    dst {1}
//
// Payload row (r, t), H = 4, bf16: element c = 100·r + 10·t + c (exact in bf16: at most 7 significant bits).
#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/combine.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

using testing::bf16_bytes;
using testing::bits_of;
using testing::routing;

std::vector<RankRouting> hand_routing() {
  return {routing(3, {1, 2, 3, -1, 0, 1}, {0.5f, 0.25f, 1.0f, 7.0f, 0.75f, 0.125f}),
          routing(3, {2, 0, -1, -1, 3, 2}, {0.375f, 0.625f, 9.0f, 9.0f, 0.25f, 0.5f})};
}

DispatchPlan hand_plan(int hidden, int alignment) {
  DispatchConfig config{.num_ranks = 2,
                        .num_experts = 4,
                        .top_k = 2,
                        .hidden = hidden,
                        .max_tokens_per_rank = 3,
                        .dtype = PayloadType::kBf16,
                        .expert_alignment = alignment};
  return value_or_throw(DispatchPlan::make(config, hand_routing()));
}

std::vector<float> payload(int r, int t) {
  std::vector<float> v;
  for (int c = 0; c < 4; ++c) v.push_back(static_cast<float>(100 * r + 10 * t + c));
  return v;
}

MaterializedRowSource hand_source() {
  std::vector<std::vector<std::byte>> rows(2);
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < 3; ++t) {
      const std::vector<std::byte> row = bf16_bytes(payload(r, t));
      rows[r].insert(rows[r].end(), row.begin(), row.end());
    }
  }
  return value_or_throw(MaterializedRowSource::make(PayloadType::kBf16, 4, std::move(rows), {{}, {}}));
}

// Concatenated payload rows of the given sources; a (-1, -1) source is a zero row.
std::vector<std::byte> rows_of(const std::vector<SourceToken>& sources) {
  std::vector<std::byte> out;
  for (const SourceToken& s : sources) {
    const std::vector<std::byte> row =
        s.rank < 0 ? std::vector<std::byte>(8, std::byte{0}) : bf16_bytes(payload(s.rank, s.token));
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(HandCase, Layout) {
  const DispatchPlan plan = hand_plan(4, 1);
  // Rank 0: to rank 0 t0, t2; to rank 1 t0, t1. Experts: e0 {t2}, e1 {t0, t2}, e2 {t0}, e3 {t1}.
  const DispatchLayout l0 = value_or_throw(expected_layout(plan, 0));
  EXPECT_EQ(l0.num_tokens_per_rank, (std::vector<int>{2, 2}));
  EXPECT_EQ(l0.num_tokens_per_expert, (std::vector<int>{1, 2, 1, 1}));
  EXPECT_EQ(l0.is_token_in_rank, (std::vector<std::uint8_t>{1, 1, 0, 1, 1, 0}));
  // Rank 1: to rank 0 t0; to rank 1 t0, t2. Experts: e0 {t0}, e1 {}, e2 {t0, t2}, e3 {t2}.
  const DispatchLayout l1 = value_or_throw(expected_layout(plan, 1));
  EXPECT_EQ(l1.num_tokens_per_rank, (std::vector<int>{1, 2}));
  EXPECT_EQ(l1.num_tokens_per_expert, (std::vector<int>{1, 0, 2, 1}));
  EXPECT_EQ(l1.is_token_in_rank, (std::vector<std::uint8_t>{1, 1, 0, 0, 0, 1}));
  // [i][j] = rows rank j receives from ranks 0..i: row 0 = [2, 2]; row 1 = [2 + 1, 2 + 2].
  EXPECT_EQ(l0.rank_prefix_matrix, (std::vector<int>{2, 2, 3, 4}));
  EXPECT_EQ(l1.rank_prefix_matrix, l0.rank_prefix_matrix);
  EXPECT_FALSE(expected_layout(plan, 2).ok());
}

TEST(HandCase, RankMajor) {
  const DispatchPlan plan = hand_plan(4, 1);
  const MaterializedRowSource source = hand_source();
  // Rank 0 receives (0,0), (0,2), (1,0).
  //   (0,0) experts [1, 2] -> local [1, -1], weights [0.5, 0]
  //   (0,2) experts [0, 1] -> local [0, 1],  weights [0.75, 0.125]
  //   (1,0) experts [2, 0] -> local [-1, 0], weights [0, 0.625]
  //   local 0: (0,2), (1,0) = 2 rows; local 1: (0,0), (0,2) = 2 rows.
  const RankMajorExpected q0 = value_or_throw(expected_rank_major(plan, 0, source));
  EXPECT_EQ(q0.index.sources, (std::vector<SourceToken>{{0, 0}, {0, 2}, {1, 0}}));
  EXPECT_EQ(q0.index.recv_topk_idx, (std::vector<int>{1, -1, 0, 1, -1, 0}));
  EXPECT_EQ(q0.index.recv_topk_weights, (std::vector<float>{0.5f, 0.0f, 0.75f, 0.125f, 0.0f, 0.625f}));
  EXPECT_EQ(q0.index.num_recv_tokens_per_expert, (std::vector<int>{2, 2}));
  EXPECT_EQ(q0.recv_x, rows_of({{0, 0}, {0, 2}, {1, 0}}));
  EXPECT_TRUE(q0.recv_x_scales.empty());
  // Rank 1 receives (0,0), (0,1), (1,0), (1,2).
  //   (0,0) [1, 2] -> [-1, 0] w [0, 0.25];   (0,1) [3, -1] -> [1, -1] w [1.0, 0]
  //   (1,0) [2, 0] -> [0, -1] w [0.375, 0];  (1,2) [3, 2]  -> [1, 0]  w [0.25, 0.5]
  //   local 0 (e2): (0,0), (1,0), (1,2) = 3; local 1 (e3): (0,1), (1,2) = 2.
  const RankMajorExpected q1 = value_or_throw(expected_rank_major(plan, 1, source));
  EXPECT_EQ(q1.index.sources, (std::vector<SourceToken>{{0, 0}, {0, 1}, {1, 0}, {1, 2}}));
  EXPECT_EQ(q1.index.recv_topk_idx, (std::vector<int>{-1, 0, 1, -1, 0, -1, 1, 0}));
  EXPECT_EQ(q1.index.recv_topk_weights,
            (std::vector<float>{0.0f, 0.25f, 1.0f, 0.0f, 0.375f, 0.0f, 0.25f, 0.5f}));
  EXPECT_EQ(q1.index.num_recv_tokens_per_expert, (std::vector<int>{3, 2}));
  EXPECT_EQ(q1.recv_x, rows_of({{0, 0}, {0, 1}, {1, 0}, {1, 2}}));
  // expert_alignment 3: [3, 2] -> [3, 3]; rank 0's [2, 2] -> [3, 3].
  EXPECT_EQ(value_or_throw(rank_major_index(hand_plan(4, 3), 1)).num_recv_tokens_per_expert,
            (std::vector<int>{3, 3}));
  EXPECT_EQ(value_or_throw(rank_major_index(hand_plan(4, 4), 0)).num_recv_tokens_per_expert,
            (std::vector<int>{4, 4}));
}

TEST(HandCase, ExpertMajorWithAlignment3) {
  const DispatchPlan plan = hand_plan(4, 3);
  const MaterializedRowSource source = hand_source();
  // Rank 0: local 0 (e0): (0,2) k0, (1,0) k1, pad; local 1 (e1): (0,0) k0, (0,2) k1, pad.
  const ExpertMajorExpected q0 = value_or_throw(expected_expert_major(plan, 0, source));
  EXPECT_EQ(q0.index.counts, (std::vector<int>{2, 2}));
  EXPECT_EQ(q0.index.segment_begin, (std::vector<int>{0, 3, 6}));
  const std::vector<SourceToken> s0{{0, 2}, {1, 0}, {-1, -1}, {0, 0}, {0, 2}, {-1, -1}};
  EXPECT_EQ(q0.index.sources(), s0);
  EXPECT_EQ(q0.recv_x, rows_of(s0));
  std::vector<int> slots;
  std::vector<float> weights;
  for (const ExpertMajorRow& row : q0.index.rows) {
    slots.push_back(row.slot);
    weights.push_back(row.weight);
  }
  EXPECT_EQ(slots, (std::vector<int>{0, 1, -1, 0, 1, -1}));
  EXPECT_EQ(weights, (std::vector<float>{0.75f, 0.625f, 0.0f, 0.5f, 0.125f, 0.0f}));
  // Rank 1: local 0 (e2): (0,0), (1,0), (1,2) (no pad, 3 = 3); local 1 (e3): (0,1), (1,2), pad.
  const ExpertMajorExpected q1 = value_or_throw(expected_expert_major(plan, 1, source));
  EXPECT_EQ(q1.index.segment_begin, (std::vector<int>{0, 3, 6}));
  const std::vector<SourceToken> s1{{0, 0}, {1, 0}, {1, 2}, {0, 1}, {1, 2}, {-1, -1}};
  EXPECT_EQ(q1.index.sources(), s1);
  EXPECT_EQ(q1.recv_x, rows_of(s1));
}

TEST(HandCase, LowLatencyBlocks) {
  const DispatchPlan plan = hand_plan(4, 1);
  const MaterializedRowSource source = hand_source();
  // C = R · T_max = 6 rows per local expert.
  // Rank 0, local 0 (e0): r0 {t2}, r1 {t0}       -> count 2, ranges (0,1) (1,1), src_info [2, 0]
  //         local 1 (e1): r0 {t0, t2}, r1 {}     -> count 2, ranges (0,2) (2,0), src_info [0, 2]
  const LlExpected q0 = value_or_throw(expected_ll(plan, 0, source));
  EXPECT_EQ(q0.index.capacity, 6);
  EXPECT_EQ(q0.index.packed_recv_count, (std::vector<int>{2, 2}));
  EXPECT_EQ(q0.index.layout_range, (std::vector<LlRange>{{0, 1}, {1, 1}, {0, 2}, {2, 0}}));
  EXPECT_EQ(q0.index.src_info, (std::vector<int>{2, 0, -1, -1, -1, -1, 0, 2, -1, -1, -1, -1}));
  EXPECT_EQ(q0.index.src_slot, (std::vector<int>{0, 1, -1, -1, -1, -1, 0, 1, -1, -1, -1, -1}));
  const SourceToken pad{-1, -1};
  EXPECT_EQ(q0.packed_recv_x,
            rows_of({{0, 2}, {1, 0}, pad, pad, pad, pad, {0, 0}, {0, 2}, pad, pad, pad, pad}));
  // Rank 1, local 0 (e2): r0 {t0}, r1 {t0, t2}   -> count 3, ranges (0,1) (1,2), src_info [0, 0, 2]
  //         local 1 (e3): r0 {t1}, r1 {t2}       -> count 2, ranges (0,1) (1,1), src_info [1, 2]
  const LlExpected q1 = value_or_throw(expected_ll(plan, 1, source));
  EXPECT_EQ(q1.index.packed_recv_count, (std::vector<int>{3, 2}));
  EXPECT_EQ(q1.index.layout_range, (std::vector<LlRange>{{0, 1}, {1, 2}, {0, 1}, {1, 1}}));
  EXPECT_EQ(q1.index.src_info, (std::vector<int>{0, 0, 2, -1, -1, -1, 1, 2, -1, -1, -1, -1}));
  EXPECT_EQ(q1.packed_recv_x,
            rows_of({{0, 0}, {1, 0}, {1, 2}, pad, pad, pad, {0, 1}, {1, 2}, pad, pad, pad, pad}));
}

float pow2(int e) { return std::ldexp(1.0f, e); }

// Partial rows (H = 1) that rank q returns for (r, t), as listed in HtCombineTrees.
float hand_partial(int q, int r, int t) {
  if (r == 0 && t == 0) return q == 0 ? 1.0f : pow2(-8);
  if (r == 0 && t == 1) return -3.0f;
  if (r == 0 && t == 2) return 5.0f;
  if (r == 1 && t == 0) return q == 0 ? 0.5f : 0.25f;
  return -0.0f;  // (1, 2)
}

TEST(HandCase, HtCombineTrees) {
  const DispatchPlan plan = hand_plan(1, 1);
  std::vector<std::pair<int, int>> calls;  // (q, t) asked for
  const PartialRowFn partial = [&](int q, int r, int t, std::span<bf16> row) {
    calls.push_back({q, t});
    row[0] = bf16::from_float(hand_partial(q, r, t));
  };
  const CombineBias bias{[](int, int, std::span<bf16> row) { row[0] = bf16::from_float(pow2(-8)); }, {}};
  // ht-rank, bias0 = 2^-8 everywhere, no bias1: acc = 2^-8 + 0 = 2^-8, then the partials of dst ascending.
  // (0,0): 2^-8 + 1 = 1.00390625; + 2^-8 = 1.0078125 -> bf16 exact           0x3F81
  // (0,1): 2^-8 - 3 = -2.99609375 -> nearest bf16 (ulp 2^-6 in [2, 4)) -3.0   0xC040
  // (0,2): 2^-8 + 5 = 5.00390625 -> nearest bf16 (ulp 2^-5) 5.0               0x40A0
  const auto r0 = value_or_throw(expected_ht_rank_combine(plan, 0, partial, bias));
  EXPECT_EQ(bits_of(r0), (std::vector<std::uint16_t>{0x3F81, 0xC040, 0x40A0}));
  EXPECT_EQ(calls, (std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {1, 1}, {0, 2}}));
  // (1,0): 2^-8 + 0.5 + 0.25 = 0.75390625 -> exact (ulp 2^-8 in [0.5, 1))     0x3F41
  // (1,1): no destination: bf16(2^-8 + 0) = 2^-8                               0x3B80
  // (1,2): 2^-8 + (-0.0) = 2^-8                                                0x3B80
  calls.clear();
  const auto r1 = value_or_throw(expected_ht_rank_combine(plan, 1, partial, bias));
  EXPECT_EQ(bits_of(r1), (std::vector<std::uint16_t>{0x3F41, 0x3B80, 0x3B80}));
  EXPECT_EQ(calls, (std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {1, 2}}));
  // Without biases, (1,2) = bf16((+0 + +0) + -0.0) = +0.0 and (1,1) = +0.0.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_rank_combine(plan, 1, partial))),
            (std::vector<std::uint16_t>{0x3F40, 0x0000, 0x0000}));

  // ht-two-level with both ranks on one node (ranks_per_node 2):
  // (0,0): node = bf16(0 + 1 + 2^-8) = bf16(1.00390625), a tie -> even 1.0; acc = 2^-8 + 1.0 = 1.00390625
  //        -> bf16 tie -> 1.0                                                   0x3F80
  // (0,1): node = -3.0; acc = 2^-8 - 3 -> -3.0                                  0xC040
  // (0,2): node = 5.0; -> 5.0                                                   0x40A0
  // (1,0): node = bf16(0.75) = 0.75; acc = 2^-8 + 0.75 = 0.75390625             0x3F41
  // (1,1): 2^-8                                                                 0x3B80
  // (1,2): node = bf16(0 + -0.0) = +0.0; acc = 2^-8                             0x3B80
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(
                plan, 0, value_or_throw(NodeLayout::uniform(2, 2)), partial, bias))),
            (std::vector<std::uint16_t>{0x3F80, 0xC040, 0x40A0}));
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(
                plan, 1, value_or_throw(NodeLayout::uniform(2, 2)), partial, bias))),
            (std::vector<std::uint16_t>{0x3F41, 0x3B80, 0x3B80}));
  // One rank per node: each node value is bf16 of one bf16 partial (itself), so it equals ht-rank.
  EXPECT_EQ(bits_of(value_or_throw(expected_ht_two_level_combine(
                plan, 0, value_or_throw(NodeLayout::uniform(2, 1)), partial, bias))),
            bits_of(r0));
}

TEST(HandCase, LlWeightedCombine) {
  const DispatchPlan plan = hand_plan(1, 1);
  // Expert outputs y(r, t, k) (H = 1).
  const float y[2][3][2] = {{{3.0f, pow2(-6)}, {-2.5f, 100.0f}, {4.0f, 8.0f}},
                            {{-0.0f, -0.0f}, {100.0f, 100.0f}, {1.0f, 1.0f}}};
  const SlotOutputFn slot_output = [&](int r, int t, int k, std::span<bf16> row) {
    EXPECT_NE(plan.topk_idx(r, t)[k], -1) << "masked slot read: " << r << " " << t << " " << k;
    row[0] = bf16::from_float(y[r][t][k]);
  };
  // (0,0): 0 + 0.5·3 = 1.5; + 0.25·2^-6 = 2^-8 -> 1.50390625, a bf16 tie between 1.5 (0x3FC0) and
  //        1.5078125 (0x3FC1) -> even                                            0x3FC0
  // (0,1): slot 1 masked: 0 + 1.0·(-2.5) = -2.5                                  0xC020
  // (0,2): 0.75·4 + 0.125·8 = 3 + 1 = 4                                          0x4080
  EXPECT_EQ(bits_of(value_or_throw(expected_ll_combine(plan, 0, slot_output))),
            (std::vector<std::uint16_t>{0x3FC0, 0xC020, 0x4080}));
  // (1,0): (+0 + 0.375·(-0)) + 0.625·(-0) = +0.0 (the sum starts from +0.0f)     0x0000
  // (1,1): no valid slot -> exact +0.0                                           0x0000
  // (1,2): 0.25·1 + 0.5·1 = 0.75                                                 0x3F40
  EXPECT_EQ(bits_of(value_or_throw(expected_ll_combine(plan, 1, slot_output))),
            (std::vector<std::uint16_t>{0x0000, 0x0000, 0x3F40}));
}

TEST(HandCase, CombinedWeights) {
  const DispatchPlan plan = hand_plan(1, 1);
  // Valid slots must be bit-equal to the inputs; the masked slot (0,1,k1) is not compared.
  std::vector<float> actual{0.5f, 0.25f, 1.0f, 0.0f, 0.75f, 0.125f};
  EXPECT_TRUE(compare_combined_weights(plan, 0, actual).ok());
  actual[4] = std::nextafter(0.75f, 1.0f);
  const MismatchReport report = compare_combined_weights(plan, 0, actual);
  EXPECT_EQ(report.mismatches(), 1);
  ASSERT_TRUE(report.first().has_value());
  EXPECT_EQ(report.first()->src_token, 2);
  EXPECT_EQ(report.first()->column, 0);
  EXPECT_EQ(report.first()->expected_bits, 0x3F400000u);
  EXPECT_EQ(report.first()->actual_bits, 0x3F400001u);
}

}  // namespace
}  // namespace eps::dispatch
