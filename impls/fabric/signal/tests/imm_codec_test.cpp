// docs/fabrics.md 6.1 / 6.2: every encoded immediate field at and beyond its limit.
#include "impls/fabric/signal/imm_codec.hpp"

#include <gtest/gtest.h>

namespace eps::fabric {
namespace {

TEST(ImmCodec, FieldsRoundTripAtTheirLimits) {
  // kind 1, parity 1, source 63, payload 2^23 - 1: every bit set except kind's high bit.
  const Result<std::uint32_t> imm = encode_imm({ImmKind::kSignal, 1, 63, (1u << 23) - 1});
  ASSERT_TRUE(imm.ok()) << imm.status().message();
  EXPECT_EQ(*imm, 0x7fffffffu);  // 01 1 111111 11111111111111111111111
  const Result<ImmFields> f = decode_imm(*imm);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, ImmKind::kSignal);
  EXPECT_EQ(f->parity, 1);
  EXPECT_EQ(f->source, 63);
  EXPECT_EQ(f->payload, (1u << 23) - 1);
  // Data, parity 0, source 5, payload 9: 00 0 000101 then 9 -> (5 << 23) | 9.
  EXPECT_EQ(*encode_imm({ImmKind::kData, 0, 5, 9}), (5u << 23) | 9u);
}

TEST(ImmCodec, SourceRank64IsRefused) {
  const Result<std::uint32_t> imm = encode_imm({ImmKind::kData, 0, 64, 0});
  ASSERT_FALSE(imm.ok());
  EXPECT_EQ(imm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(imm.status().message(), "imm.source: must be in [0, 63], got 64");
  EXPECT_FALSE(encode_imm({ImmKind::kData, 0, -1, 0}).ok());
  EXPECT_FALSE(encode_imm({ImmKind::kData, 2, 0, 0}).ok());
  EXPECT_FALSE(encode_imm({ImmKind::kData, 0, 0, 1u << 23}).ok());
}

TEST(ImmCodec, ChannelAndTokensAtTheirLimits) {
  for (auto [channel, tokens] :
       {std::pair{1023, 8191}, std::pair{1023, 4095}, std::pair{0, 0}, std::pair{512, 1}}) {
    const Result<std::uint32_t> payload = encode_count_payload(channel, tokens);
    ASSERT_TRUE(payload.ok()) << payload.status().message();
    EXPECT_EQ(payload_channel(*payload), channel);
    EXPECT_EQ(payload_tokens(*payload), tokens);
    EXPECT_EQ(*payload, (static_cast<std::uint32_t>(channel) << 13) | static_cast<std::uint32_t>(tokens));
  }
  EXPECT_EQ(encode_count_payload(1024, 1).status().message(), "imm.channel: must be in [0, 1023], got 1024");
  EXPECT_EQ(encode_count_payload(0, 8192).status().message(), "imm.tokens: must be in [0, 8191], got 8192");
  EXPECT_FALSE(encode_count_payload(-1, 0).ok());
  EXPECT_FALSE(encode_count_payload(0, -1).ok());
}

TEST(ImmCodec, BarrierAndUnknownKindsAreNotSignals) {
  EXPECT_FALSE(decode_imm(0xC0000000u).ok());  // kind 3: the fabric barrier's
  EXPECT_FALSE(decode_imm(0x80000000u).ok());  // kind 2: unused
  EXPECT_TRUE(decode_imm(0x40000000u).ok());
}

}  // namespace
}  // namespace eps::fabric
