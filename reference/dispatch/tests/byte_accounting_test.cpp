// Byte accounting (docs/dispatch.md 5.6) on the hand case of hand_case_test.cpp (R = 2, E = 4, K = 2):
//   rank 0  t0 experts [1, 2] -> ranks {0, 1};  t1 [3, -1] -> {1};  t2 [0, 1] -> {0}
//   rank 1  t0 experts [2, 0] -> ranks {0, 1};  t1 all masked;      t2 [3, 2] -> {1}
// HT rows (r, t, q): (0,0,0) (0,0,1) (0,1,1) (0,2,0) (1,0,0) (1,0,1) (1,2,1).
//   received by q0: 3 rows, 1 from rank 1; by q1: 4 rows, 2 from rank 0.
//   sent by r0: 4 rows, 2 to rank 1; by r1: 3 rows, 1 to rank 0.
// LL selections (r, t, k) -> q: r0: (t0,k0)->0 (t0,k1)->1 (t1,k0)->1 (t2,k0)->0 (t2,k1)->0;
//                               r1: (t0,k0)->1 (t0,k1)->0 (t2,k0)->1 (t2,k1)->1.
//   received by q0: 4 (1 from rank 1); by q1: 5 (2 from rank 0). Sent by r0: 5 (2 away); r1: 4 (1 away).
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/byte_accounting.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

using testing::routing;

DispatchPlan hand_plan(PayloadType dtype, int hidden) {
  DispatchConfig config{.num_ranks = 2,
                        .num_experts = 4,
                        .top_k = 2,
                        .hidden = hidden,
                        .max_tokens_per_rank = 3,
                        .dtype = dtype};
  return value_or_throw(DispatchPlan::make(
      config, {routing(3, {1, 2, 3, -1, 0, 1}, {0.5f, 0.25f, 1.0f, 7.0f, 0.75f, 0.125f}),
               routing(3, {2, 0, -1, -1, 3, 2}, {0.375f, 0.625f, 9.0f, 9.0f, 0.25f, 0.5f})}));
}

// {recv algo, recv physical}, {send algo, send physical}
RankTraffic traffic(std::int64_t ra, std::int64_t rp, std::int64_t sa, std::int64_t sp) {
  return {{ra, rp}, {sa, sp}};
}

TEST(ByteAccounting, RowSizes) {
  EXPECT_EQ(ht_dispatch_row_bytes(PayloadType::kBf16, 7168), 14336);         // 2H
  EXPECT_EQ(ht_dispatch_row_bytes(PayloadType::kFp8, 7168), 7168 + 56 * 4);  // H + H/128·4 = 7392
  EXPECT_EQ(ll_dispatch_message_bytes(PayloadType::kFp8, 7168), 7392);  // payload and scales only (no header)
  EXPECT_EQ(ll_dispatch_message_bytes(PayloadType::kBf16, 7168), 14336);  // 2H
  EXPECT_EQ(combine_row_bytes(7168), 14336);
}

TEST(ByteAccounting, HandCaseBf16) {
  // bf16, H = 4: HT row 8 B, LL message 8 B, combine row 8 B.
  const ByteAccount a = account_bytes(hand_plan(PayloadType::kBf16, 4));
  EXPECT_EQ(a.ht_dispatch, (std::vector<RankTraffic>{traffic(3 * 8, 1 * 8, 4 * 8, 2 * 8),
                                                     traffic(4 * 8, 2 * 8, 3 * 8, 1 * 8)}));
  // Combine reverses the HT rows: rank 0 receives back its 4 rows (2 from rank 1) and sends 3.
  EXPECT_EQ(a.ht_combine, (std::vector<RankTraffic>{traffic(4 * 8, 2 * 8, 3 * 8, 1 * 8),
                                                    traffic(3 * 8, 1 * 8, 4 * 8, 2 * 8)}));
  EXPECT_EQ(a.ll_dispatch, (std::vector<RankTraffic>{traffic(4 * 8, 1 * 8, 5 * 8, 2 * 8),
                                                     traffic(5 * 8, 2 * 8, 4 * 8, 1 * 8)}));
  EXPECT_EQ(a.ll_combine, (std::vector<RankTraffic>{traffic(5 * 8, 2 * 8, 4 * 8, 1 * 8),
                                                    traffic(4 * 8, 1 * 8, 5 * 8, 2 * 8)}));
}

TEST(ByteAccounting, HandCaseFp8) {
  // fp8, H = 128: HT row 128 + 4 = 132 B, LL message 132 B too (docs/dispatch.md 5.6: algo counts payload and
  // scales only; a transport's header is not algo), combine row 256 B.
  const ByteAccount a = account_bytes(hand_plan(PayloadType::kFp8, 128));
  EXPECT_EQ(a.ht_dispatch[0], traffic(3 * 132, 132, 4 * 132, 2 * 132));
  EXPECT_EQ(a.ht_dispatch[1], traffic(4 * 132, 2 * 132, 3 * 132, 132));
  EXPECT_EQ(a.ll_dispatch[0], traffic(4 * 132, 132, 5 * 132, 2 * 132));
  EXPECT_EQ(a.ll_dispatch[1], traffic(5 * 132, 2 * 132, 4 * 132, 132));
  EXPECT_EQ(a.ht_combine[0], traffic(4 * 256, 2 * 256, 3 * 256, 256));
  EXPECT_EQ(a.ll_combine[1], traffic(4 * 256, 256, 5 * 256, 2 * 256));
}

}  // namespace
}  // namespace eps::dispatch
