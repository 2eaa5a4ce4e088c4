// Helpers shared by the reference/dispatch tests: building plans and deterministic row sources.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/row_source.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps::dispatch::testing {

inline RankRouting routing(int num_tokens, std::vector<int> idx, std::vector<float> weights) {
  return RankRouting{num_tokens, std::move(idx), std::move(weights)};
}

// The value list as bf16 bit patterns, in bytes (native order), as a bf16 payload row holds them.
inline std::vector<std::byte> bf16_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t bits = bf16::from_float(values[i]).bits;
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

inline std::vector<std::uint16_t> bits_of(const std::vector<bf16>& values) {
  std::vector<std::uint16_t> out;
  for (bf16 v : values) out.push_back(v.bits);
  return out;
}

// Random routing for R ranks (test-only mt19937): T_r uniform in [0, max_tokens] (or exactly
// max_tokens when `full`), K distinct experts per token drawn from [0, E), each slot masked (-1) with
// probability mask_prob; weights are small dyadic values, masked slots carry garbage.
inline std::vector<RankRouting> random_routing(std::mt19937& rng, int num_ranks, int num_experts, int top_k,
                                               int max_tokens, double mask_prob, bool full = false) {
  std::vector<RankRouting> out;
  std::uniform_int_distribution<int> tokens(0, max_tokens);
  std::bernoulli_distribution masked(mask_prob);
  std::uniform_int_distribution<int> weight(-64, 64);
  std::vector<int> experts(static_cast<std::size_t>(num_experts));
  for (int r = 0; r < num_ranks; ++r) {
    RankRouting routing;
    routing.num_tokens = full ? max_tokens : tokens(rng);
    for (int t = 0; t < routing.num_tokens; ++t) {
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int k = 0; k < top_k; ++k) {
        const bool drop = masked(rng);
        routing.topk_idx.push_back(drop ? -1 : experts[k]);
        routing.topk_weights.push_back(drop ? -1234.5f : static_cast<float>(weight(rng)) / 32.0f);
      }
    }
    out.push_back(std::move(routing));
  }
  return out;
}

// A row source computing every byte from (rank, token, byte index) with a fixed integer hash: an
// independent generator, so expected rows can be rebuilt in the tests without the code under test.
class HashRowSource final : public RowSource {
 public:
  HashRowSource(std::size_t row_bytes, int num_scales) : row_bytes_(row_bytes), num_scales_(num_scales) {}

  static std::uint8_t byte_at(int rank, int token, std::size_t i) {
    std::uint32_t h = static_cast<std::uint32_t>(rank) * 0x9e3779b1u ^
                      static_cast<std::uint32_t>(token) * 0x85ebca6bu ^
                      static_cast<std::uint32_t>(i) * 0xc2b2ae35u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return static_cast<std::uint8_t>(h);
  }
  static float scale_at(int rank, int token, int g) {
    return static_cast<float>(rank * 1000 + token) + 0.125f * g;
  }

  void fill_row(int rank, int token, std::span<std::byte> row) const override {
    EXPECT_EQ(row.size(), row_bytes_);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = std::byte{byte_at(rank, token, i)};
  }
  void fill_scales(int rank, int token, std::span<float> scales) const override {
    EXPECT_EQ(scales.size(), static_cast<std::size_t>(num_scales_));
    for (int g = 0; g < num_scales_; ++g) scales[g] = scale_at(rank, token, g);
  }

 private:
  std::size_t row_bytes_;
  int num_scales_;
};

}  // namespace eps::dispatch::testing
