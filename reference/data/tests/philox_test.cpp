// docs/numerics.md 2.1: Philox4x32-10 and the epsuite stream addressing.
#include "reference/data/philox.hpp"

#include <gtest/gtest.h>

#include <set>

namespace eps::data {
namespace {

struct Kat {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxBlock expected;
};

// Published known-answer vectors for philox4x32_10 from the Random123 distribution (D. E. Shaw Research,
// Random123 1.x, file examples/kat_vectors, lines "philox4x32 10 CTR0..CTR3 KEY0 KEY1 EXPECTED0..3").
// The third uses the hexadecimal digits of pi as counter and key.
constexpr Kat kKats[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

TEST(Philox, PublishedKnownAnswerVectors) {
  for (const Kat& kat : kKats) {
    const PhiloxBlock out = philox4x32_10(kat.counter, kat.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], kat.expected.v[i]) << "word " << i;
  }
}

TEST(Philox, IsConstexpr) {
  constexpr PhiloxBlock out = philox4x32_10(kKats[0].counter, kKats[0].key);
  static_assert(out.v[0] == 0x6627e8d5u && out.v[3] == 0x9b00dbd8u);
  SUCCEED();
}

// One hand-computed round: c = {1, 0, 1, 0}, k = {0, 0}: the products are M0 * 1 and M1 * 1, so
// hi = 0 and lo = the multiplier: c' = {0 ^ 0 ^ 0, M1, 0 ^ 0 ^ 0, M0}.
TEST(Philox, SingleRoundByHand) {
  const PhiloxCounter out = philox4x32_round(PhiloxCounter{{1, 0, 1, 0}}, PhiloxKey{{0, 0}});
  EXPECT_EQ(out.v[0], 0u);
  EXPECT_EQ(out.v[1], kPhiloxM1);
  EXPECT_EQ(out.v[2], 0u);
  EXPECT_EQ(out.v[3], kPhiloxM0);
}

// The documented layout: key = {seed_lo, seed_hi}, counter = {col >> 2, row, coord0, stream << 24 | coord1},
// word col & 3.
TEST(PhiloxAddressing, MatchesDocumentedLayout) {
  const std::uint64_t seed = 0x0123456789abcdefull;
  const StreamAddress address{DataStream::kRouterLogits, 7, 0x00abcdef};
  const std::uint32_t row = 99, col = 13;
  const PhiloxBlock block = philox4x32_10(PhiloxCounter{{3, 99, 7, (2u << 24) | 0x00abcdef}},
                                          PhiloxKey{{0x89abcdefu, 0x01234567u}});
  EXPECT_EQ(stream_bits(seed, address, row, col), block.v[1]);
  EXPECT_EQ(stream_bits(seed, address, row, 12), block.v[0]);
  EXPECT_EQ(stream_bits(seed, address, row, 15), block.v[3]);
  // 64-bit draw pair 6 = columns 12 (low word) and 13 (high word).
  EXPECT_EQ(stream_bits64(seed, address, row, 6), (std::uint64_t{block.v[1]} << 32) | block.v[0]);
  EXPECT_EQ(stream_bits64(seed, address, row, 7), (std::uint64_t{block.v[3]} << 32) | block.v[2]);
}

// Distinct coordinates give distinct words (the mapping is injective, Philox a bijection per key).
TEST(PhiloxAddressing, NeighbouringCoordinatesDiffer) {
  std::set<std::uint32_t> seen;
  const std::uint64_t seed = 42;
  for (std::uint32_t stream : {1u, 2u}) {
    for (std::uint32_t coord0 : {0u, 1u}) {
      for (std::uint32_t coord1 : {0u, 1u}) {
        for (std::uint32_t row : {0u, 1u}) {
          for (std::uint32_t col = 0; col < 8; ++col) {
            seen.insert(stream_bits(seed, {static_cast<DataStream>(stream), coord0, coord1}, row, col));
          }
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), 2u * 2 * 2 * 2 * 8);  // 128 words, no repeats
  EXPECT_NE(stream_bits(1, {DataStream::kPayload, 0, 0}, 0, 0),
            stream_bits(2, {DataStream::kPayload, 0, 0}, 0, 0));
  EXPECT_NE(stream_bits(1ull << 32, {DataStream::kPayload, 0, 0}, 0, 0),
            stream_bits(0, {DataStream::kPayload, 0, 0}, 0, 0));
}

TEST(PhiloxUniform, ExactConversions) {
  EXPECT_EQ(uniform_from_bits(0), 0.0);
  EXPECT_EQ(uniform_from_bits(0x80000000u), 0.5);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 1.0 - 0x1p-32);  // largest value, below 1
  EXPECT_EQ(uniform_from_bits(1), 0x1p-32);
  EXPECT_EQ(uniform_float_from_bits(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(uniform_float_from_bits(0x000000ffu), 0.0f);  // low 8 bits dropped
  EXPECT_EQ(uniform_float_from_bits(0x00000100u), 0x1p-24f);
}

}  // namespace
}  // namespace eps::data
