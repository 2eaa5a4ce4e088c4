// `epsuite bench fabric` helpers (perf/bench/fabric_engine.hpp, perf/bench/table.hpp): who puts to whom, the
// checked byte pattern, the slot layout and the locked table format. The MPI measurement itself runs in
// bench_cli_fabric-*.
#include "perf/bench/fabric_engine.hpp"
#include "perf/bench/table.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "reference/data/philox.hpp"

namespace eps::bench_fabric {
namespace {

TEST(BenchFabricPairs, HandComputed) {
  // R = 1 writes to itself.
  EXPECT_EQ(put_peer(0, 1), 0);
  EXPECT_EQ(put_source(0, 1), 0);
  EXPECT_EQ(ping_partner(0, 1), 0);
  // R = 4: pairs across the halves, (r + 2) % 4.
  EXPECT_EQ(put_peer(0, 4), 2);
  EXPECT_EQ(put_peer(1, 4), 3);
  EXPECT_EQ(put_peer(2, 4), 0);
  EXPECT_EQ(put_peer(3, 4), 1);
  EXPECT_EQ(ping_partner(1, 4), 3);
  EXPECT_EQ(ping_partner(3, 4), 1);
  // R = 3: (r + 1) % 3 is a ring, 0 -> 1 -> 2 -> 0, so rank 0 hears from rank 2; the ping-pong pairs 0 and 1
  // and rank 2 pings itself.
  EXPECT_EQ(put_peer(2, 3), 0);
  EXPECT_EQ(put_source(0, 3), 2);
  EXPECT_EQ(put_source(1, 3), 0);
  EXPECT_EQ(ping_partner(0, 3), 1);
  EXPECT_EQ(ping_partner(1, 3), 0);
  EXPECT_EQ(ping_partner(2, 3), 2);
}

TEST(BenchFabricPairs, EveryRankHearsFromExactlyOneRank) {
  for (int ranks = 1; ranks <= 17; ++ranks) {
    std::set<int> targets;
    for (int r = 0; r < ranks; ++r) {
      const int peer = put_peer(r, ranks);
      ASSERT_GE(peer, 0);
      ASSERT_LT(peer, ranks);
      EXPECT_EQ(put_source(peer, ranks), r) << "R = " << ranks;
      targets.insert(peer);
      const int partner = ping_partner(r, ranks);
      EXPECT_EQ(ping_partner(partner, ranks), r) << "R = " << ranks << ", rank " << r;
    }
    EXPECT_EQ(static_cast<int>(targets.size()), ranks);
  }
}

TEST(BenchFabricSlots, CapAndWindow) {
  EXPECT_EQ(window_slots(8, 64), 64u);
  EXPECT_EQ(window_slots(std::size_t{1} << 20, 64), 64u);        // 64 x 1 MiB = the 64 MiB cap
  EXPECT_EQ(window_slots(std::size_t{4} << 20, 64), 16u);        // 64 MiB / 4 MiB
  EXPECT_EQ(window_slots((std::size_t{16} << 20) - 1, 64), 4u);  // floor(64 Mi / (16 Mi - 1)) = 4
  EXPECT_EQ(window_slots(std::size_t{128} << 20, 64), 1u);       // never fewer than one slot
  EXPECT_EQ(window_slots(8, 3), 3u);
}

TEST(BenchFabricPattern, FollowsTheDocumentedPhiloxAddressing) {
  // Byte 0x123 = 291 of writer 5 under seed 0x100000007: block 291 / 16 = 18, byte 291 % 16 = 3 = word 0,
  // bits 24..31.
  const std::uint64_t seed = 0x100000007ull;
  const data::PhiloxBlock block = data::philox4x32_10({{18, 0, 5, 0xfab0}}, {{7, 1}});
  EXPECT_EQ(pattern_byte(seed, 5, 0x123), static_cast<std::uint8_t>(block.v[0] >> 24));
  // Byte 18 * 16 + 14: word 3, bits 16..23.
  EXPECT_EQ(pattern_byte(seed, 5, 18 * 16 + 14), static_cast<std::uint8_t>(block.v[3] >> 16));
}

TEST(BenchFabricPattern, OffsetAddressableAndDistinctPerWriter) {
  std::vector<std::byte> whole(200);
  fill_pattern(3, 1, 0, whole);
  std::vector<std::byte> part(61);
  fill_pattern(3, 1, 37, part);
  for (std::size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], whole[37 + i]) << i;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(static_cast<std::uint8_t>(whole[i]), pattern_byte(3, 1, i)) << i;
  }
  std::vector<std::byte> other_writer(200);
  fill_pattern(3, 2, 0, other_writer);
  std::vector<std::byte> other_seed(200);
  fill_pattern(4, 1, 0, other_seed);
  int same_writer = 0;
  int same_seed = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    same_writer += whole[i] == other_writer[i];
    same_seed += whole[i] == other_seed[i];
  }
  // Independent random bytes agree about 200 / 256 times; 20 would be far out of chance.
  EXPECT_LT(same_writer, 20);
  EXPECT_LT(same_seed, 20);
}

TEST(BenchFabricPattern, CountWrongSeesPoisonAndSingleFlips) {
  std::vector<std::byte> data(100);
  fill_pattern(9, 4, 1000, data);
  EXPECT_EQ(count_wrong(9, 4, 1000, data).count, 0);
  EXPECT_FALSE(count_wrong(9, 4, 1000, data).first_offset.has_value());
  const std::uint8_t expected = pattern_byte(9, 4, 1005);
  data[5] ^= std::byte{0x10};
  const WrongBytes one = count_wrong(9, 4, 1000, data);
  EXPECT_EQ(one.count, 1);
  ASSERT_TRUE(one.first_offset.has_value());
  EXPECT_EQ(*one.first_offset, 5u);
  EXPECT_EQ(one.expected, expected);
  EXPECT_EQ(one.got, expected ^ 0x10);
  fill_poison(9, 4, 1000, data);
  EXPECT_EQ(count_wrong(9, 4, 1000, data).count, 100);  // the poison differs from every expected byte
  EXPECT_EQ(count_wrong(9, 4, 1001, std::span<const std::byte>(data).subspan(1)).count, 99);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(BenchFabricTable, HeaderAndRowsLineUp) {
  const std::vector<std::string> header = lines_of(fabric_table_header("# config\nno hash"));
  ASSERT_EQ(header.size(), 5u);
  EXPECT_EQ(header[0], "# config");
  EXPECT_EQ(header[1], "# no hash");
  EXPECT_EQ(header[2], "#");
  FabricRow r;
  r.size = 4096;
  r.bytes = 4096 * 64;
  r.put_p50_us = 104.8576;  // 262144 B / 104.8576 us = 2.5 GB/s
  r.put_gbps = 2.5;
  r.lat_p50_us = 3.25;
  r.lat_p99_us = 7.5;
  r.copy_p50_us = 26.2144;
  r.copy_gbps = 10.0;
  r.slowest_rank = 1;
  const std::string unchecked = fabric_table_row(r);
  r.wrong = 0;
  const std::string checked = fabric_table_row(r);
  // Widths 10, 12, 10 x 7 (the last of them is copy GB/s), 9 (put/copy = 2.5 / 10), 8 and 7.
  EXPECT_EQ(unchecked, std::string("      4096") + "      262144" + "    104.86" + "      2.50" +
                           "      3.25" + "      7.50" + "     26.21" + "     10.00" + "     0.25" +
                           "       1" + "    N/A\n");
  EXPECT_EQ(checked.substr(0, checked.size() - 8), unchecked.substr(0, unchecked.size() - 8));
  EXPECT_TRUE(checked.ends_with("      0\n"));
  // Every title ends where its column ends: the title lines and a row have the same length, and each
  // title's last character sits over the last character of its column.
  const std::string row = unchecked.substr(0, unchecked.size() - 1);
  EXPECT_EQ(header[3].size(), row.size());
  EXPECT_EQ(header[4].size() + 7, row.size());  // the units line has nothing over #wrong
  for (const char* title :
       {"size", "bytes", "put p50", "lat p50", "lat p99", "copy p50", "put/copy", "slowest", "#wrong"}) {
    const std::size_t end = header[3].find(title) + std::string(title).size();
    EXPECT_NE(row[end - 1], ' ') << title;
    EXPECT_TRUE(end == row.size() || row[end] == ' ') << title;
  }
}

TEST(BenchFabricTable, RatioIsZeroWithoutACopyTime) {
  FabricRow r;
  r.put_gbps = 1.0;
  EXPECT_TRUE(fabric_table_row(r).ends_with("     0.00       0    N/A\n"));
}

}  // namespace
}  // namespace eps::bench_fabric
