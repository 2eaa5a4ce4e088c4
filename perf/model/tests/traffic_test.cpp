// The traffic of docs/model.md 16.3 against the reference byte account (reference/dispatch byte_accounting,
// docs/dispatch.md 5.6), which counts the same rows by another route: per rank, sent and received.
#include "perf/model/traffic.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "impls/problem/transport_problem.hpp"
#include "reference/dispatch/byte_accounting.hpp"

namespace eps::model {
namespace {

TrafficShape small_shape(bool per_selection, int ranks_per_node) {
  TrafficShape s;
  s.ranks = 6;
  s.ranks_per_node = ranks_per_node;
  s.experts = 24;
  s.top_k = 4;
  s.hidden = 256;
  s.tokens = 32;
  s.max_tokens = 32;
  s.dtype = dispatch::PayloadType::kFp8;
  s.per_selection = per_selection;
  s.workload = "zipf:1.2";
  s.seed = 7;
  return s;
}

dispatch::ByteAccount reference_account(const TrafficShape& s) {
  problem::ProblemShape p;
  p.ranks = s.ranks;
  p.experts = s.experts;
  p.top_k = s.top_k;
  p.hidden = s.hidden;
  p.max_tokens = s.max_tokens;
  p.nodes = consecutive_nodes(s.ranks, s.ranks_per_node);
  p.dtype = s.dtype;
  p.tokens_per_rank = s.tokens;
  return dispatch::account_bytes(problem::Problem::make(p, s.workload, 0, s.seed, 0, s.seed).value().plan());
}

void expect_matches(const OpTraffic& t, const std::vector<dispatch::RankTraffic>& account) {
  double total = 0, physical = 0, busiest = 0, received_max = 0;
  for (const dispatch::RankTraffic& r : account) {
    total += static_cast<double>(r.recv.algo);
    physical += static_cast<double>(r.recv.physical);
    busiest = std::max(busiest, static_cast<double>(r.send.algo + r.recv.algo));
    received_max = std::max(received_max, static_cast<double>(r.recv.algo));
  }
  EXPECT_DOUBLE_EQ(t.self_bytes + t.intra_bytes + t.inter_bytes, total);
  EXPECT_DOUBLE_EQ(t.intra_bytes + t.inter_bytes, physical);
  EXPECT_DOUBLE_EQ(t.busiest_rank_bytes, busiest);
  EXPECT_NEAR(t.balancedness, total / static_cast<double>(account.size()) / received_max, 1e-12);
}

TEST(ModelTraffic, MatchesTheReferenceByteAccount) {
  for (const bool per_selection : {false, true}) {
    const TrafficShape s = small_shape(per_selection, 6);
    const Result<Traffic> t = op_traffic(s);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const dispatch::ByteAccount a = reference_account(s);
    expect_matches(t->dispatch, per_selection ? a.ll_dispatch : a.ht_dispatch);
    expect_matches(t->combine, per_selection ? a.ll_combine : a.ht_combine);
    EXPECT_EQ(t->dispatch.inter_bytes, 0.0);  // one node
    EXPECT_EQ(t->dispatch.max_peers, 5);      // zipf over 24 experts reaches every rank with 32 tokens
  }
}

TEST(ModelTraffic, NodesSplitIntraFromInter) {
  const Result<Traffic> one = op_traffic(small_shape(false, 6));
  const Result<Traffic> three = op_traffic(small_shape(false, 2));
  const Result<Traffic> six = op_traffic(small_shape(false, 1));
  ASSERT_TRUE(one.ok() && three.ok() && six.ok());
  EXPECT_EQ(six->dispatch.intra_bytes, 0.0);
  EXPECT_DOUBLE_EQ(six->dispatch.inter_bytes, one->dispatch.intra_bytes);
  EXPECT_DOUBLE_EQ(three->dispatch.intra_bytes + three->dispatch.inter_bytes, one->dispatch.intra_bytes);
  EXPECT_GT(three->dispatch.intra_bytes, 0.0);
  EXPECT_GT(three->dispatch.inter_bytes, 0.0);
}

TEST(ModelTraffic, ShapeErrorsNameTheField) {
  TrafficShape s = small_shape(false, 6);
  s.experts = 25;  // not a multiple of 6 ranks
  const Result<Traffic> t = op_traffic(s);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace eps::model
