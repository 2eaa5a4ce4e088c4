// docs/eplb.md 8.1: placement construction and the invariant checker.
#include "reference/eplb/placement.hpp"

#include <gtest/gtest.h>

namespace eps::eplb {
namespace {

using Rows = std::vector<std::vector<int>>;

Placement two_rank_placement() {
  // E = 3, P = 4, R = 2: slots [0, 1 | 0, 2]; expert 0 has replicas at slots 0 and 2.
  const Rows phy2log = {{0, 1, 0, 2}};
  return placement_from_phy2log(phy2log, 3, 2).value();
}

void expect_violation(const Placement& p, const std::string& invariant) {
  const Status s = check_placement(p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("placement: " + invariant + ":", 0), 0u) << s.message();
}

TEST(Placement, FromPhy2logBuildsInverseAndCounts) {
  const Placement p = two_rank_placement();
  EXPECT_EQ(p.num_layers, 1);
  EXPECT_EQ(p.slots_per_rank(), 2);
  EXPECT_EQ(p.max_replicas, 2);
  EXPECT_EQ(p.replica_count(0, 0), 2);
  EXPECT_EQ(p.replica_count(0, 1), 1);
  EXPECT_EQ(p.replica_count(0, 2), 1);
  EXPECT_EQ(p.replica_slot(0, 0, 0), 0);
  EXPECT_EQ(p.replica_slot(0, 0, 1), 2);
  EXPECT_EQ(p.replica_slot(0, 1, 0), 1);
  EXPECT_EQ(p.replica_slot(0, 1, 1), -1);  // -1 padding
  EXPECT_EQ(p.replica_slot(0, 2, 0), 3);
  EXPECT_EQ(p.rank_of_slot(2), 1);
  EXPECT_TRUE(check_placement(p).ok());
  EXPECT_EQ(replica_index_rows(p), (Rows{{0, 0, 1, 0}}));
  EXPECT_EQ(phy2log_rows(p), (Rows{{0, 1, 0, 2}}));
}

TEST(Placement, ExplicitReplicaOrderIsKept) {
  const Rows phy2log = {{0, 1, 0, 2}};
  const Rows replica = {{1, 0, 0, 0}};  // slot 2 is replica 0 of expert 0
  const Placement p = make_placement(phy2log, replica, 3, 2).value();
  EXPECT_EQ(p.replica_slot(0, 0, 0), 2);
  EXPECT_EQ(p.replica_slot(0, 0, 1), 0);
}

TEST(Placement, DuplicateReplicaIndexIsRejected) {
  const Rows phy2log = {{0, 1, 0, 2}};
  const Rows replica = {{0, 0, 0, 0}};
  auto p = make_placement(phy2log, replica, 3, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("both replica 0 of expert 0"), std::string::npos)
      << p.status().message();
}

TEST(PlacementInvariants, MissingExpertIsCoverage) {
  const Rows phy2log = {{0, 1, 0, 1}};  // expert 2 has no replica
  auto p = placement_from_phy2log(phy2log, 3, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind("placement: coverage:", 0), 0u) << p.status().message();
}

TEST(PlacementInvariants, ExpertOutOfRangeIsRange) {
  Placement p = two_rank_placement();
  p.phy2log[3] = 3;
  expect_violation(p, "range");
}

TEST(PlacementInvariants, WrongLogcntIsCount) {
  Placement p = two_rank_placement();
  p.logcnt[1] = 2;
  expect_violation(p, "count");
}

TEST(PlacementInvariants, SlotsNotDivisibleByRanksIsRanks) {
  Placement p = two_rank_placement();
  p.num_ranks = 3;
  expect_violation(p, "ranks");
}

TEST(PlacementInvariants, Log2phyNotInverseIsInverse) {
  Placement p = two_rank_placement();
  std::swap(p.log2phy[0], p.log2phy[2]);  // expert 0 replica 0 -> slot 1 (holds expert 1)
  expect_violation(p, "inverse");
  Placement q = two_rank_placement();
  q.log2phy[3] = 1;  // padding of expert 1 no longer -1
  expect_violation(q, "inverse");
  Placement r = two_rank_placement();
  r.log2phy[1] = 0;  // expert 0 lists slot 0 twice
  expect_violation(r, "inverse");
}

TEST(PlacementInvariants, WrongSizesAreShape) {
  Placement p = two_rank_placement();
  p.phy2log.pop_back();
  expect_violation(p, "shape");
  Placement q = two_rank_placement();
  q.num_slots = 2;  // P < E
  expect_violation(q, "shape");
  Placement r = two_rank_placement();
  r.log2phy.push_back(-1);
  expect_violation(r, "shape");
}

}  // namespace
}  // namespace eps::eplb
