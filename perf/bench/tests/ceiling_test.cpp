// The ceiling's byte matrices and copy plans (perf/bench/ceiling.hpp), expected values computed by hand; the
// matrices' column sums are also held against reference/dispatch's byte account, written independently.
// The copy itself runs under MPI in bench_ceiling_cli (every row of a real bench carries a ceiling).
#include "perf/bench/ceiling.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "reference/dispatch/byte_accounting.hpp"

namespace eps::bench {
namespace {

using dispatch::DispatchConfig;
using dispatch::DispatchPlan;
using dispatch::PayloadType;
using dispatch::RankRouting;

// R = 2, E = 4 (experts 0, 1 on rank 0; 2, 3 on rank 1), K = 2, H = 128, fp8: a dispatch unit is 128 code
// bytes + 1 fp32 scale = 132 B; a combine unit is 2H = 256 B.
//   rank 0: t0 -> experts {0, 2} (ranks 0, 1); t1 -> {1, 0} (rank 0 twice); t2 -> {3, masked} (rank 1)
//   rank 1: t0 -> {2, 3} (rank 1 twice); t1 -> {0, masked} (rank 0)
DispatchPlan two_rank_plan() {
  DispatchConfig config;
  config.num_ranks = 2;
  config.num_experts = 4;
  config.top_k = 2;
  config.hidden = 128;
  config.max_tokens_per_rank = 4;
  config.dtype = PayloadType::kFp8;
  std::vector<RankRouting> routing(2);
  routing[0] = {3, {0, 2, 1, 0, 3, -1}, {0.5f, 0.5f, 0.5f, 0.5f, 1.0f, 0.0f}};
  routing[1] = {2, {2, 3, 0, -1}, {0.5f, 0.5f, 1.0f, 0.0f}};
  Result<DispatchPlan> plan = DispatchPlan::make(config, std::move(routing));
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return std::move(plan).value();
}

ByteMatrix matrix_of(int ranks, const std::vector<std::int64_t>& row_major) {
  ByteMatrix m(ranks);
  for (int s = 0; s < ranks; ++s) {
    for (int d = 0; d < ranks; ++d) m.add(s, d, row_major[static_cast<std::size_t>(s * ranks + d)]);
  }
  return m;
}

TEST(CeilingBytes, RankMajorDispatchIsOneRowPerDestinationRank) {
  // Rank 0 sends t0 to ranks 0 and 1, t1 to rank 0 (once: one row per destination rank), t2 to rank 1;
  // rank 1 sends t0 to rank 1 (once) and t1 to rank 0.
  const ByteMatrix m = transport_bytes(two_rank_plan(), false, {.dispatch = true, .combine = false});
  EXPECT_EQ(m, matrix_of(2, {2 * 132, 2 * 132, 1 * 132, 1 * 132}));
}

TEST(CeilingBytes, PerSelectionDispatchIsOneMessagePerValidSlot) {
  // Rank 0: slots to rank 0 are (t0,k0), (t1,k0), (t1,k1); to rank 1 (t0,k1), (t2,k0). Rank 1: to itself
  // (t0,k0), (t0,k1); to rank 0 (t1,k0).
  const ByteMatrix m = transport_bytes(two_rank_plan(), true, {.dispatch = true, .combine = false});
  EXPECT_EQ(m, matrix_of(2, {3 * 132, 2 * 132, 1 * 132, 2 * 132}));
}

TEST(CeilingBytes, CombineTravelsBackAtTwoBytesPerChannel) {
  // The rank-major rows return expert rank -> source rank at 256 B each.
  const ByteMatrix m = transport_bytes(two_rank_plan(), false, {.dispatch = false, .combine = true});
  EXPECT_EQ(m, matrix_of(2, {2 * 256, 1 * 256, 2 * 256, 1 * 256}));
  const ByteMatrix both = transport_bytes(two_rank_plan(), false, {.dispatch = true, .combine = true});
  EXPECT_EQ(both, matrix_of(2, {264 + 512, 264 + 256, 132 + 512, 132 + 256}));
}

TEST(CeilingBytes, ColumnSumsAreTheReferenceReceivedBytes) {
  const DispatchPlan plan = two_rank_plan();
  const dispatch::ByteAccount account = dispatch::account_bytes(plan);
  const ByteMatrix ht_d = transport_bytes(plan, false, {.dispatch = true, .combine = false});
  const ByteMatrix ht_c = transport_bytes(plan, false, {.dispatch = false, .combine = true});
  const ByteMatrix ll_d = transport_bytes(plan, true, {.dispatch = true, .combine = false});
  const ByteMatrix ll_c = transport_bytes(plan, true, {.dispatch = false, .combine = true});
  for (int q = 0; q < 2; ++q) {
    EXPECT_EQ(ht_d.received_by(q), account.ht_dispatch[q].recv.algo) << "rank " << q;
    EXPECT_EQ(ht_c.received_by(q), account.ht_combine[q].recv.algo) << "rank " << q;
    EXPECT_EQ(ll_d.received_by(q), account.ll_dispatch[q].recv.algo) << "rank " << q;
    EXPECT_EQ(ll_c.received_by(q), account.ll_combine[q].recv.algo) << "rank " << q;
    EXPECT_EQ(ht_d.sent_by(q), account.ht_dispatch[q].send.algo) << "rank " << q;
  }
}

TEST(CeilingBytes, ReceivedEvenlySplitsOverTheOtherRanks) {
  // Rank 0 received 10 B: 5 from each of ranks 1 and 2. Rank 1 received 7 B: 4 from rank 0 (the remainder
  // goes to the lowest source), 3 from rank 2. Rank 2 received nothing.
  const std::vector<std::int64_t> received = {10, 7, 0};
  EXPECT_EQ(received_evenly(received), matrix_of(3, {0, 4, 0, 5, 0, 0, 5, 3, 0}));
  // Alone, a rank's bytes are its own.
  const std::vector<std::int64_t> alone = {9};
  EXPECT_EQ(received_evenly(alone), matrix_of(1, {9}));
}

TEST(CeilingCopyPlan, StaggeredPeersThenItselfWithOffsets) {
  // bytes[src][dst]:   to 0  to 1  to 2
  //   from 0             1     2     3
  //   from 1             4     5     6
  //   from 2             7     8     9
  const ByteMatrix m = matrix_of(3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  // Rank 1 copies to 2, then 0, then itself. Its source buffer holds [to 0: 4][to 1: 5][to 2: 6], so the
  // offsets are 9, 0 and 4; in a destination's region sources are ascending, so rank 1's block follows rank
  // 0's: offset 3 in rank 2's region, 1 in rank 0's, 2 in its own.
  CopyPlan expected;
  expected.blocks = {{2, 9, 3, 6}, {0, 0, 1, 4}, {1, 4, 2, 5}};
  expected.sources = {0, 1, 2};
  expected.send_bytes = 15;
  expected.recv_bytes = 2 + 5 + 8;
  EXPECT_EQ(copy_plan(m, 1), expected);
  // Rank 2 copies to 0 (offset 0 in its buffer, after 1 + 4 in rank 0's region), 1 (offset 7; after 2 + 5),
  // then itself (offset 15; after 3 + 6).
  EXPECT_EQ(copy_plan(m, 2).blocks, (std::vector<CopyBlock>{{0, 0, 5, 7}, {1, 7, 7, 8}, {2, 15, 9, 9}}));
}

TEST(CeilingCopyPlan, PairsWithoutBytesAreNeitherCopiedNorAwaited) {
  // Rank 0 sends only to rank 2; rank 1 sends nothing; rank 2 sends only to rank 1.
  const ByteMatrix m = matrix_of(3, {0, 0, 5, 0, 0, 0, 0, 6, 0});
  const CopyPlan zero = copy_plan(m, 0);
  EXPECT_EQ(zero.blocks, (std::vector<CopyBlock>{{2, 0, 0, 5}}));
  EXPECT_TRUE(zero.sources.empty());
  EXPECT_EQ(zero.recv_bytes, 0);
  const CopyPlan one = copy_plan(m, 1);
  EXPECT_TRUE(one.blocks.empty());
  EXPECT_EQ(one.sources, (std::vector<int>{2}));
  EXPECT_EQ(one.send_bytes, 0);
  EXPECT_EQ(one.recv_bytes, 6);
}

}  // namespace
}  // namespace eps::bench
