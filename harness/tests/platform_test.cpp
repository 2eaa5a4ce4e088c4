// Platform identity (SPEC 9.1 platform, SPEC 9.2 fingerprints).
#include "harness/platform.hpp"

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(Fnv1a64, PublishedTestVectors) {
  // From the FNV reference test suite (Fowler/Noll/Vo).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

Platform two_ranks(std::string host0, std::string host1) {
  Platform p;
  p.ranks = {{std::move(host0), "cpu: X", "mlx5_0"}, {std::move(host1), "cpu: X", "mlx5_0"}};
  p.provider = "mpi (btl self,vader)";
  p.libraries = {{"mpi", "Open MPI v4.1.4"}};
  return p;
}

TEST(Platform, FingerprintIgnoresHostNamesOnly) {
  const std::string base = platform_fingerprint(two_ranks("node-a", "node-b"));
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(platform_fingerprint(two_ranks("node-c", "node-d")), base);
  Platform device = two_ranks("node-a", "node-b");
  device.ranks[1].device = "cpu: Y";
  EXPECT_NE(platform_fingerprint(device), base);
  Platform nic = two_ranks("node-a", "node-b");
  nic.ranks[0].nic = "none";
  EXPECT_NE(platform_fingerprint(nic), base);
  Platform library = two_ranks("node-a", "node-b");
  library.libraries["mpi"] = "Open MPI v5.0.0";
  EXPECT_NE(platform_fingerprint(library), base);
  Platform fewer = two_ranks("node-a", "node-b");
  fewer.ranks.pop_back();
  EXPECT_NE(platform_fingerprint(fewer), base);
}

TEST(Platform, JsonCarriesHostsRanksAndFingerprint) {
  const Platform p = two_ranks("node-a", "node-b");
  const Json j = platform_to_json(p);
  EXPECT_EQ(j.at("hostnames"), Json::parse(R"(["node-a","node-b"])"));
  EXPECT_EQ(j.at("ranks")[1], Json::parse(R"({"rank":1,"host":"node-b","device":"cpu: X","nic":"mlx5_0"})"));
  EXPECT_EQ(j.at("provider"), "mpi (btl self,vader)");
  EXPECT_EQ(j.at("fingerprint"), platform_fingerprint(p));
}

}  // namespace
}  // namespace eps
