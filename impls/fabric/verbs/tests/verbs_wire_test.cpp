// verbs_wire.hpp: the address and region-key records ranks exchange, byte for byte, and the byte order
// of immediates (docs/fabrics.md 6.1: the value put is the value the target sees).
#include "impls/fabric/verbs/verbs_wire.hpp"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace eps::fabric::verbs {
namespace {

std::vector<int> as_ints(std::span<const std::byte> bytes) {
  std::vector<int> out;
  for (std::byte b : bytes) out.push_back(std::to_integer<int>(b));
  return out;
}

PeerAddress sample_address() {
  PeerAddress a;
  a.link_layer = 2;  // IBV_LINK_LAYER_ETHERNET
  a.mtu = 5;         // IBV_MTU_4096
  a.port = 1;
  a.lid = 0x1234;
  a.qpn = 0x00abcdef;
  a.psn = 0x00123456;
  a.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  return a;
}

TEST(VerbsWire, PeerAddressLayoutIsFixedLittleEndian) {
  const PeerAddressBytes bytes = serialize(sample_address());
  // version, link layer, mtu, port | lid 0x1234 LE | zero | qpn 0x00abcdef LE | psn 0x00123456 LE | gid
  const std::vector<int> expected = {1, 2,    5,    1,    0x34, 0x12, 0,    0,    0xef, 0xcd, 0xab,
                                     0, 0x56, 0x34, 0x12, 0,    0xfe, 0x80, 0,    0,    0,    0,
                                     0, 0,    0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  EXPECT_EQ(as_ints(bytes), expected);
}

TEST(VerbsWire, PeerAddressRoundTrips) {
  const PeerAddress a = sample_address();
  const PeerAddressBytes bytes = serialize(a);
  const Result<PeerAddress> parsed = parse_peer_address(bytes, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, a);
  PeerAddress extremes;
  extremes.mtu = 1;
  extremes.lid = 0xffff;
  extremes.qpn = kMax24Bit;
  extremes.psn = kMax24Bit;
  const Result<PeerAddress> again = parse_peer_address(serialize(extremes), 0);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, extremes);
}

// Corrupts one byte of a valid record and expects a kEnvironment error naming `field` and the rank.
void expect_rejected(std::size_t at, int value, const char* field) {
  PeerAddressBytes bytes = serialize(sample_address());
  bytes[at] = static_cast<std::byte>(value);
  const Result<PeerAddress> parsed = parse_peer_address(bytes, 3);
  ASSERT_FALSE(parsed.ok()) << "byte " << at << " = " << value;
  EXPECT_EQ(parsed.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(parsed.status().message().find("rank 3"), std::string::npos) << parsed.status().message();
  EXPECT_NE(parsed.status().message().find(field), std::string::npos) << parsed.status().message();
}

TEST(VerbsWire, PeerAddressRejectsForeignRecords) {
  expect_rejected(0, 2, "version");
  expect_rejected(2, 0, "mtu");
  expect_rejected(2, 6, "mtu");
  expect_rejected(6, 1, "bytes 6..7");
  expect_rejected(11, 1, "qpn");  // qpn 0x01abcdef: 25 bits
  expect_rejected(15, 0x80, "psn");
  const PeerAddressBytes bytes = serialize(sample_address());
  const Result<PeerAddress> short_record = parse_peer_address(std::span(bytes).first(31), 1);
  ASSERT_FALSE(short_record.ok());
  EXPECT_NE(short_record.status().message().find("size must be 32 bytes, got 31"), std::string::npos)
      << short_record.status().message();
}

TEST(VerbsWire, RegionKeyLayoutAndRoundTrip) {
  const RegionKey key{0x0102030405060708ull, 0xa0b0c0d0u};
  const RegionKeyBytes bytes = serialize(key);
  const std::vector<int> expected = {8, 7, 6, 5, 4, 3, 2, 1, 0xd0, 0xc0, 0xb0, 0xa0, 0, 0, 0, 0};
  EXPECT_EQ(as_ints(bytes), expected);
  const Result<RegionKey> parsed = parse_region_key(bytes, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, key);
}

TEST(VerbsWire, RegionKeyRejectsBadRecords) {
  RegionKeyBytes bytes = serialize(RegionKey{4096, 7});
  bytes[13] = std::byte{1};
  const Result<RegionKey> padded = parse_region_key(bytes, 2);
  ASSERT_FALSE(padded.ok());
  EXPECT_NE(padded.status().message().find("rank 2"), std::string::npos);
  const Result<RegionKey> truncated = parse_region_key(std::span(bytes).first(8), 2);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("got 8"), std::string::npos) << truncated.status().message();
}

TEST(VerbsWire, ImmediateTravelsBigEndian) {
  // libibverbs' imm_data is __be32: the most significant byte goes first in memory.
  const std::uint32_t wire = imm_to_wire(0x01020304u);
  unsigned char bytes[4];
  std::memcpy(bytes, &wire, sizeof(bytes));
  EXPECT_EQ(bytes[0], 0x01);
  EXPECT_EQ(bytes[1], 0x02);
  EXPECT_EQ(bytes[2], 0x03);
  EXPECT_EQ(bytes[3], 0x04);
  const unsigned char received[4] = {0xde, 0xad, 0xbe, 0xef};
  std::uint32_t from_wire = 0;
  std::memcpy(&from_wire, received, sizeof(received));
  EXPECT_EQ(imm_from_wire(from_wire), 0xdeadbeefu);
  for (std::uint32_t v : {0u, 1u, 0x80000001u, 0xc0ffee00u, 0xffffffffu})
    EXPECT_EQ(imm_from_wire(imm_to_wire(v)), v);
}

}  // namespace
}  // namespace eps::fabric::verbs
