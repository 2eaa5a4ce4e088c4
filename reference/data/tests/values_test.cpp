// docs/numerics.md 2.2: value mappings exact in the storage type, element functions and batch fills agree.
#include "reference/data/fill.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace eps::data {
namespace {

constexpr std::uint64_t kSeed = 0x5eed5eed1234ull;

// Independent oracle of docs/numerics.md 2.2 in float64: u = bits / 2^32, v = (int(u * 256) - 128) / 64.
double payload_oracle(std::uint32_t bits) {
  const double u = static_cast<double>(bits) / 4294967296.0;
  return (static_cast<int>(u * 256.0) - 128) / 64.0;
}

// Oracle for logits: uniform in [-4, 4) quantized down to multiples of 2^-10: floor((8u - 4) * 1024) / 1024.
double logit_oracle(std::uint32_t bits) {
  const double u = static_cast<double>(bits) / 4294967296.0;
  return std::floor((8.0 * u - 4.0) * 1024.0) / 1024.0;
}

TEST(Payload, HandValues) {
  EXPECT_EQ(payload_from_bits(0x00000000u), -2.0f);           // (0 - 128) / 64
  EXPECT_EQ(payload_from_bits(0x80000000u), 0.0f);            // (128 - 128) / 64
  EXPECT_EQ(payload_from_bits(0xffffffffu), 127.0f / 64.0f);  // (255 - 128) / 64 = 1.984375
  EXPECT_EQ(payload_from_bits(0x81ffffffu), 1.0f / 64.0f);    // top byte 0x81 = 129
}

TEST(Payload, EveryValueExactMultipleOf1Over64AndBf16RoundTrips) {
  const std::uint32_t tokens = 37, hidden = 131;  // hidden not a multiple of 4: partial Philox blocks
  std::vector<bf16> x(tokens * hidden);
  ASSERT_TRUE(fill_payload(kSeed, 2, 0, tokens, hidden, x).ok());
  std::set<int> codes;
  for (std::uint32_t t = 0; t < tokens; ++t) {
    for (std::uint32_t h = 0; h < hidden; ++h) {
      const float v = x[t * hidden + h].to_float();
      const double scaled = static_cast<double>(v) * 64.0;
      ASSERT_EQ(scaled, std::floor(scaled));
      ASSERT_GE(v, -2.0f);
      ASSERT_LT(v, 2.0f);
      ASSERT_EQ(bf16::from_float(v).to_float(), v);  // exact in bf16
      const std::uint32_t bits = stream_bits(kSeed, {DataStream::kPayload, 2, 0}, t, h);
      ASSERT_EQ(static_cast<double>(v), payload_oracle(bits));
      ASSERT_EQ(x[t * hidden + h], payload_value(kSeed, 2, t, h));
      codes.insert(static_cast<int>(scaled));
    }
  }
  EXPECT_EQ(codes.size(), 256u);  // 4847 draws cover all 256 codes -128..127
  EXPECT_EQ(*codes.begin(), -128);
  EXPECT_EQ(*codes.rbegin(), 127);
}

TEST(Logits, HandValuesAndExactness) {
  EXPECT_EQ(logit_from_bits(0x00000000u), -4.0f);
  EXPECT_EQ(logit_from_bits(0x80000000u), 0.0f);
  EXPECT_EQ(logit_from_bits(0xffffffffu), 4.0f - 0x1p-10f);   // (8191 - 4096) / 1024 = 3.9990234375
  EXPECT_EQ(logit_from_bits(0x00080000u), -4.0f + 0x1p-10f);  // bits >> 19 = 1
  const std::uint32_t tokens = 64, experts = 256;
  std::vector<float> logits(tokens * experts);
  ASSERT_TRUE(fill_router_logits(kSeed, 3, 1, 100, tokens, experts, logits).ok());
  int tokens_with_ties = 0;
  for (std::uint32_t t = 0; t < tokens; ++t) {
    std::set<float> distinct;
    for (std::uint32_t e = 0; e < experts; ++e) {
      const float l = logits[t * experts + e];
      ASSERT_EQ(std::ldexp(l, 10), std::floor(std::ldexp(l, 10)));
      ASSERT_GE(l, -4.0f);
      ASSERT_LT(l, 4.0f);
      ASSERT_EQ(static_cast<double>(l),
                logit_oracle(stream_bits(kSeed, {DataStream::kRouterLogits, 1, 3}, 100 + t, e)));
      ASSERT_EQ(l, router_logit(kSeed, 3, 1, 100 + t, e));
      distinct.insert(l);
    }
    tokens_with_ties += distinct.size() < experts;
  }
  // 256 draws from 8192 levels: P(no tie) = prod(1 - i/8192) ~ exp(-256*255/16384) ~ 2e-2 per token.
  EXPECT_GE(tokens_with_ties, 50);
}

TEST(ExpertWeight, ScaleExponentTable) {
  // n with 2^(2n-1) <= fan_in < 2^(2n+1), worked by hand.
  EXPECT_EQ(weight_scale_exponent(1), 0);    // 1 < 2
  EXPECT_EQ(weight_scale_exponent(2), 1);    // 2 <= 2 < 8 (tie 1/sqrt(2): smaller scale 1/2)
  EXPECT_EQ(weight_scale_exponent(7), 1);    // 7 < 8
  EXPECT_EQ(weight_scale_exponent(8), 2);    // 8 <= 8 < 32
  EXPECT_EQ(weight_scale_exponent(128), 4);  // 128 <= 128 < 512: 1/sqrt(128) = 2^-3.5 -> 2^-4
  EXPECT_EQ(weight_scale_exponent(384), 4);  // 128 <= 384 < 512 (ec-dlm-owt F)
  EXPECT_EQ(weight_scale_exponent(512), 5);  // 512 <= 512 < 2048: 1/sqrt(512) = 2^-4.5 -> 2^-5
  EXPECT_EQ(weight_scale_exponent(2047), 5);
  EXPECT_EQ(weight_scale_exponent(7168), 6);  // 2048 <= 7168 < 8192: 1/84.7 -> 1/64
}

// Oracle: the integer n nearest to log2(fan_in) / 2 in float64, halves rounded up.
TEST(ExpertWeight, ScaleExponentMatchesLogOracle) {
  for (std::uint32_t fan_in = 1; fan_in <= 70000; ++fan_in) {
    const double half_log = std::log2(static_cast<double>(fan_in)) / 2.0;
    const int oracle = static_cast<int>(std::floor(half_log + 0.5));
    ASSERT_EQ(weight_scale_exponent(fan_in), oracle) << "fan_in " << fan_in;
  }
}

TEST(ExpertWeight, ValuesArePayloadsTimesPowerOfTwo) {
  const std::uint32_t rows = 9, cols = 384;  // W2 of ec-dlm-owt: [H, F], fan_in F = 384 -> scale 2^-4
  std::vector<bf16> w(rows * cols);
  ASSERT_TRUE(fill_expert_weight(kSeed, 5, WeightMatrix::kW2, 17, rows, cols, w).ok());
  const StreamAddress address{DataStream::kExpertWeight, 17, (1u << 16) | 5};
  for (std::uint32_t r = 0; r < rows; ++r) {
    for (std::uint32_t c = 0; c < cols; ++c) {
      const float v = w[r * cols + c].to_float();
      ASSERT_EQ(static_cast<double>(v), payload_oracle(stream_bits(kSeed, address, r, c)) / 16.0);
      ASSERT_EQ(w[r * cols + c], expert_weight_value(kSeed, 5, WeightMatrix::kW2, 17, r, c, cols));
    }
  }
  // Matrices of one expert are independent streams: W1 and W2 agree only by chance (~1/256 for equal codes).
  int same = 0;
  for (std::uint32_t c = 0; c < cols; ++c) {
    same += expert_weight_value(kSeed, 5, WeightMatrix::kW1, 17, 0, c, cols) == w[c];
  }
  EXPECT_LT(same, static_cast<int>(cols) / 16);
}

TEST(TopkWeight, PositiveMultiplesOf2ToMinus10UpToOne) {
  EXPECT_EQ(topk_weight_from_bits(0), 0x1p-10f);
  EXPECT_EQ(topk_weight_from_bits(0xffffffffu), 1.0f);  // 1 + 1023 = 1024
  const std::uint32_t tokens = 50, k = 7;
  std::vector<float> w(tokens * k);
  ASSERT_TRUE(fill_topk_weights(kSeed, 0, 3, 4, 10, tokens, k, w).ok());
  for (std::uint32_t t = 0; t < tokens; ++t) {
    for (std::uint32_t j = 0; j < k; ++j) {
      const float v = w[t * k + j];
      ASSERT_GT(v, 0.0f);
      ASSERT_LE(v, 1.0f);
      ASSERT_EQ(std::ldexp(v, 10), std::floor(std::ldexp(v, 10)));
      ASSERT_EQ(v, topk_weight(kSeed, 0, 3, 4, 10 + t, j));
    }
  }
}

// docs/numerics.md 2.1: the same values whatever the batch, offset or order of generation.
TEST(Regeneration, BatchOffsetAndOrderIndependent) {
  const std::uint32_t tokens = 24, hidden = 70;
  std::vector<bf16> whole(tokens * hidden);
  ASSERT_TRUE(fill_payload(kSeed, 2, 0, tokens, hidden, whole).ok());
  for (std::uint32_t t = tokens; t-- > 0;) {  // reversed, one token at a time
    std::vector<bf16> one(hidden);
    ASSERT_TRUE(fill_payload(kSeed, 2, t, 1, hidden, one).ok());
    for (std::uint32_t h = 0; h < hidden; ++h) ASSERT_EQ(one[h], whole[t * hidden + h]);
  }
  // A narrower hidden size is a prefix of every row (columns are addressed, not counted).
  std::vector<bf16> narrow(tokens * 5);
  ASSERT_TRUE(fill_payload(kSeed, 2, 0, tokens, 5, narrow).ok());
  for (std::uint32_t t = 0; t < tokens; ++t) {
    for (std::uint32_t h = 0; h < 5; ++h) ASSERT_EQ(narrow[t * 5 + h], whole[t * hidden + h]);
  }
  // Other ranks and seeds differ.
  std::vector<bf16> other(tokens * hidden);
  ASSERT_TRUE(fill_payload(kSeed, 3, 0, tokens, hidden, other).ok());
  int same = 0;
  for (std::size_t i = 0; i < other.size(); ++i) same += other[i] == whole[i];
  EXPECT_LT(same, static_cast<int>(other.size()) / 64);  // ~1/256 agree by chance
}

TEST(BatchErrors, NameTheField) {
  std::vector<bf16> x(10);
  Status status = fill_payload(kSeed, 0, 0, 3, 4, x);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "out: must hold 3 x 4 = 12 elements, got 10");
  std::vector<float> l(4);
  status = fill_router_logits(kSeed, 1024, 0, 0, 1, 4, l);
  EXPECT_EQ(status.message(), "layer: must be in [0, 1023], got 1024");
  status = fill_topk_weights(kSeed, 0, 16384, 0, 0, 1, 4, l);
  EXPECT_EQ(status.message(), "step: must be in [0, 16383], got 16384");
  status = fill_payload(kSeed, 0, 0xffffffffull, 2, 1, std::span<bf16>(x.data(), 2));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fill_payload(kSeed, 0, 0xffffffffull, 1, 1, std::span<bf16>(x.data(), 1)).ok());
  EXPECT_FALSE(fill_expert_weight(kSeed, 0, WeightMatrix::kGate, 0, 1, 0, std::span<bf16>()).ok());
  EXPECT_TRUE(fill_payload(kSeed, 0, 0, 0, 7168, std::span<bf16>()).ok());  // zero tokens
}

}  // namespace
}  // namespace eps::data
