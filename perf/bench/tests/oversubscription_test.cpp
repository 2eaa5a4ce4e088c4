// Oversubscription (docs/results.md 9.5): which node is oversubscribed, by the ranks alone or with the
// proxy's threads, and the line every command prints, on hand-made censuses.
#include "perf/bench/oversubscription.hpp"

#include <gtest/gtest.h>

namespace eps::bench {
namespace {

CpuCensus one_node(int ranks, int cpus) { return CpuCensus{{NodeCpus{"vm", ranks, cpus, 1}}}; }

TEST(Oversubscription, FourRanksOnTwoCpusAreOversubscribed) {
  const std::optional<Oversubscription> o = find_oversubscription(one_node(4, 2), 0);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->ranks, 4);
  EXPECT_EQ(o->cpus, 2);
  EXPECT_EQ(o->helper_threads, 0);
  EXPECT_EQ(oversubscription_line(*o), "4 ranks on 2 CPUs: timings measure the scheduler, not the transport");
  // The ranks alone decide when they are too many: the proxy's threads are not added to the line.
  const std::optional<Oversubscription> with_proxy = find_oversubscription(one_node(4, 2), 4);
  ASSERT_TRUE(with_proxy.has_value());
  EXPECT_EQ(with_proxy->helper_threads, 0);
}

TEST(Oversubscription, AsManyRanksAsCpusAreNot) {
  EXPECT_FALSE(find_oversubscription(one_node(2, 2), 0).has_value());
  EXPECT_FALSE(find_oversubscription(one_node(1, 16), 4).has_value());  // 1 + 4 threads on 16 CPUs
  EXPECT_FALSE(find_oversubscription(one_node(3, 15), 4).has_value());  // exactly 15 threads
}

TEST(Oversubscription, ProxyThreadsCountWhereTheProxyRuns) {
  const std::optional<Oversubscription> o = find_oversubscription(one_node(2, 2), 4);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->helper_threads, 8);
  EXPECT_EQ(
      oversubscription_line(*o),
      "2 ranks and their 8 proxy threads on 2 CPUs: proxy timings measure the scheduler, not the transport");
  const std::optional<Oversubscription> one = find_oversubscription(one_node(1, 1), 4);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(
      oversubscription_line(*one),
      "1 rank and its 4 proxy threads on 1 CPU: proxy timings measure the scheduler, not the transport");
  EXPECT_EQ(helper_threads_per_rank("proxy", 4), 4);
  EXPECT_EQ(helper_threads_per_rank("direct", 4), 0);
}

// Ranks on one node share its CPUs; nodes do not share. The worst node is reported, by name when there are
// several.
TEST(Oversubscription, PerNodeTheWorstNodeIsNamed) {
  const CpuCensus census{
      {NodeCpus{"node0", 2, 4, 2}, NodeCpus{"node1", 6, 4, 1}, NodeCpus{"node2", 4, 2, 1}}};
  const std::optional<Oversubscription> o = find_oversubscription(census, 0);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->host, "node2");  // 4 on 2 is worse than 6 on 4
  EXPECT_EQ(oversubscription_line(*o),
            "4 ranks on 2 CPUs of node node2: timings measure the scheduler, not the transport");
  const Json json = oversubscription_to_json(*o);
  EXPECT_EQ(json.at("ranks"), 4);
  EXPECT_EQ(json.at("cpus"), 2);
  EXPECT_EQ(json.at("proxy_threads"), 0);
  EXPECT_EQ(json.at("host"), "node2");
  EXPECT_EQ(json.at("note"), oversubscription_line(*o));
  EXPECT_EQ(census.fewest_cpus_of_a_rank(), 1);
  EXPECT_FALSE(find_oversubscription(CpuCensus{{NodeCpus{"a", 4, 4, 1}, NodeCpus{"b", 2, 8, 4}}}, 0));
}

}  // namespace
}  // namespace eps::bench
