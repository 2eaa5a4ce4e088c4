// The combine trees (docs/dispatch.md 5.5, docs/layer.md 4.3): how the rows returned for one token become its
// bf16 output. One enum for every room: the transports declare and run the trees (impls/transport), the
// expectations of reference/dispatch/combine.hpp compute all three, and the MoE layer reference
// (reference/layer/combine.hpp) evaluates ht-rank and ll-weighted for any placement.
//
// CombineAccumulator is the arithmetic every tree is written in, one token's [H] row at a time: an fp32
// accumulator, one rounding per operation (the reference is built with -ffp-contract=off, so w · y and the
// following add are never fused), rounded to bf16 once at the end (docs/numerics.md 1.1, 1.4).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "reference/numerics/bf16.hpp"

namespace eps {

enum class CombineTree { kHtRank, kHtTwoLevel, kLlWeighted };

// "ht-rank", "ht-two-level", "ll-weighted".
std::string_view combine_tree_name(CombineTree tree);

class CombineAccumulator {
 public:
  explicit CombineAccumulator(int hidden) : acc_(static_cast<std::size_t>(hidden)) {}

  // acc = fp32(bias0) + fp32(bias1), an absent (empty) bias reading as +0.0f: DeepEP's accumulator start of
  // the ht trees. Without biases acc = +0.0f, the start of every other sum.
  void start(std::span<const bf16> bias0 = {}, std::span<const bf16> bias1 = {});
  // acc = acc + fp32(row): a partial of the ht trees.
  void add(std::span<const bf16> row);
  // acc = acc + weight · fp32(row): a slot of ll-weighted (the product rounds before the add).
  void add_weighted(float weight, std::span<const bf16> row);
  // out = bf16(acc), round to nearest even.
  void round(std::span<bf16> out) const;

 private:
  std::vector<float> acc_;
};

}  // namespace eps
