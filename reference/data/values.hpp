// Deterministic values of docs/numerics.md 2.2, exact in their storage type, addressed per element.
//
// Every value is a pure function of (seed, coordinates) through `stream_bits` (philox.hpp): any rank
// regenerates any other rank's data without communication, and nothing depends on R, on which rank
// asks, on the batch it is generated in, or on generation order. The EPS_HD element functions are the
// definition (device code includes this header: it depends only on philox.hpp and bf16.hpp); the
// host batch helpers of fill.hpp produce bit-identical values faster and check their arguments.
//
// Stream coordinates (philox.hpp: counter = {col >> 2, row, coord0, stream << 24 | coord1}):
//
//   stream              coord0          coord1                         row        col
//   kPayload            rank            0                              token      hidden column
//   kRouterLogits       rank            layer                          token      expert
//   kExpertWeight       expert (*)      matrix << 16 | layer           out row    in column
//   kTopkWeight         rank            layer << 14 | step             token      slot k
//   kRoutingSelect      rank            layer << 14 | step             token      2j, 2j+1 (draw j)
//   kRoutingSlotMask    rank            layer << 14 | step             token      slot k
//   kExpertPermutation  0               layer                          0          expert
//   kWindowPreference   rank            layer << 14 | step             window     2j, 2j+1 (draw j)
//   kDenoiseMask        rank            step                           token      0
//   kDenoiseRatio       rank            step                           sample     0
//   kTokensPerRank      0               0                              rank       0, 1 (one draw)
//
//   "draw j" is a 64-bit value from two words (`stream_bits64`, low word = even column).
//   (*) shared experts use their shared index, the router gate uses 0; `WeightMatrix` tells them apart.
//
// Limits implied by the packing: layer <= kMaxLayer (1023), step <= kMaxStep (16383), matrix < 256.
// `token`, `row`, `col` are 32-bit (a rank's tokens, H, E, K all < 2^32).
#pragma once

#include <cstdint>

#include "reference/data/philox.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps::data {

inline constexpr std::uint32_t kMaxLayer = (1u << 10) - 1;
inline constexpr std::uint32_t kMaxStep = (1u << 14) - 1;

// Matrix ids of kExpertWeight (part of the data contract: append only). Matrices are row-major
// [out, in] as in docs/layer.md 4.1 (W1, W3: [F, H]; W2: [H, F]; gate: [E, H]), so fan_in = in = columns.
enum class WeightMatrix : std::uint8_t {
  kW1 = 0,
  kW2 = 1,
  kW3 = 2,
  kGate = 3,      // router gate GEMM weights [E, H]
  kSharedW1 = 4,  // shared experts: coord0 = shared expert index
  kSharedW2 = 5,
  kSharedW3 = 6,
};

// Packs (layer, step) into coord1 for the per-step streams (layer <= kMaxLayer, step <= kMaxStep).
EPS_HD constexpr std::uint32_t layer_step_coord(std::uint32_t layer, std::uint32_t step) {
  return (layer << 14) | step;
}

// docs/numerics.md 2.2 payload code: int(u * 256) - 128 with u = bits * 2^-32, i.e. (bits >> 24) - 128, in
// [-128, 127].
EPS_HD constexpr int payload_code(std::uint32_t bits) { return static_cast<int>(bits >> 24) - 128; }

// docs/numerics.md 2.2 payload value (int(u * 256) - 128) / 64: a multiple of 1/64 in [-2, 2); |code| <= 128
// needs at most 8 significant bits, so the value is exact in bf16 (and in fp32).
EPS_HD constexpr float payload_from_bits(std::uint32_t bits) {
  return static_cast<float>(payload_code(bits)) * 0x1p-6f;
}

// Token payload x[rank][token][column] as bf16 (exact).
EPS_HD inline bf16 payload_value(std::uint64_t seed, std::uint32_t rank, std::uint32_t token,
                                 std::uint32_t column) {
  return bf16::from_float(
      payload_from_bits(stream_bits(seed, {DataStream::kPayload, rank, 0}, token, column)));
}

// docs/numerics.md 2.2 router logit: uniform in [-4, 4) quantized to multiples of 2^-10, i.e.
// floor(u * 8192) / 1024 - 4 = ((bits >> 19) - 4096) * 2^-10, exact in fp32 (13 significant bits).
// 8192 levels only, so ties between experts of one token occur often (docs/numerics.md 1.3 tie-breaks get
// exercised).
EPS_HD constexpr float logit_from_bits(std::uint32_t bits) {
  return static_cast<float>(static_cast<int>(bits >> 19) - 4096) * 0x1p-10f;
}

// Router logit l[layer][rank][token][expert] in fp32 (exact).
EPS_HD inline float router_logit(std::uint64_t seed, std::uint32_t layer, std::uint32_t rank,
                                 std::uint32_t token, std::uint32_t expert) {
  return logit_from_bits(stream_bits(seed, {DataStream::kRouterLogits, rank, layer}, token, expert));
}

// Exponent n of the weight scale 2^-n ~ 1/sqrt(fan_in): n = round(log2(fan_in) / 2) with halves rounded
// up, i.e. the integer n with 2^(2n-1) <= fan_in < 2^(2n+1). The nearest power of two in the log domain;
// on a tie (fan_in = 2^(2n-1), where 1/sqrt(fan_in) = 2^(-n+1/2)) the smaller scale 2^-n is taken. The
// scale is always within a factor sqrt(2) of 1/sqrt(fan_in). Examples: 1 -> 0, 2 -> 1, 7 -> 1, 8 -> 2,
// 128 -> 4, 512 -> 5, 2048 -> 6, 7168 -> 6. Requires fan_in >= 1.
EPS_HD constexpr int weight_scale_exponent(std::uint32_t fan_in) {
  int n = 0;
  // Advance while fan_in >= 2^(2n+1), i.e. fan_in is not below the upper bound of n's interval.
  while (n < 16 && (static_cast<std::uint64_t>(fan_in) >> (2 * n + 1)) != 0) ++n;
  return n;
}

// Expert weight: payload_from_bits(bits) * 2^-weight_scale_exponent(fan_in), exact in bf16 (a code of at
// most 8 significant bits times a power of two >= 2^-16).
EPS_HD inline bf16 expert_weight_value(std::uint64_t seed, std::uint32_t layer, WeightMatrix matrix,
                                       std::uint32_t expert, std::uint32_t row, std::uint32_t col,
                                       std::uint32_t fan_in) {
  const StreamAddress address{DataStream::kExpertWeight, expert,
                              (static_cast<std::uint32_t>(matrix) << 16) | layer};
  const float scale = static_cast<float>(1.0 / static_cast<double>(1u << weight_scale_exponent(fan_in)));
  return bf16::from_float(payload_from_bits(stream_bits(seed, address, row, col)) * scale);
}

// Dispatch top-k weight: (1 + (bits >> 22)) * 2^-10, a positive multiple of 2^-10 in [2^-10, 1], exact
// in fp32 (at most 10 significant bits). Not all are exact in bf16 (8 bits): weights travel as fp32
// (docs/dispatch.md 5).
EPS_HD constexpr float topk_weight_from_bits(std::uint32_t bits) {
  return static_cast<float>(1u + (bits >> 22)) * 0x1p-10f;
}

// Top-k weight of slot k of (rank, token) at (layer, step).
EPS_HD inline float topk_weight(std::uint64_t seed, std::uint32_t layer, std::uint32_t step,
                                std::uint32_t rank, std::uint32_t token, std::uint32_t slot) {
  return topk_weight_from_bits(
      stream_bits(seed, {DataStream::kTopkWeight, rank, layer_step_coord(layer, step)}, token, slot));
}

}  // namespace eps::data
