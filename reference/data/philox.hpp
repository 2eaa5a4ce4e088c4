// Philox4x32-10 counter-based generator (docs/numerics.md 2.1) and the epsuite data-stream addressing built
// on it.
//
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11):
// a keyed bijection of a 128-bit counter (4 x 32-bit words) under a 64-bit key (2 x 32-bit words),
// 10 rounds. Each round: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2 (32x32 -> 64-bit products),
// c' = {hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0}; the key is bumped by the Weyl constants (W0, W1)
// between rounds (9 bumps for 10 rounds). Checked against the published Random123 known-answer vectors
// (reference/data/tests/philox_test.cpp).
//
// epsuite addressing (the one layout every generator uses; any rank can regenerate any value from its
// coordinates alone, never from R, from who asks, or from generation order):
//
//   key     = { seed & 0xffffffff, seed >> 32 }                       the 64-bit run seed, unmixed
//   counter = { col >> 2, row, address.coord0, (stream << 24) | address.coord1 }
//   value   = philox4x32_10(counter, key).v[col & 3]
//
// so the 64-bit element index (row << 32 | col) addresses one 32-bit word, four consecutive columns
// share one Philox block (counter words 0 and 1 hold col >> 2 and row), and
// (stream, coord0, coord1) selects an independent stream. The mapping (stream, coord0, coord1, row, col)
// -> (counter, word) is injective while coord1 < 2^24 (`kMaxCoord1`), so distinct values never share
// random bits. What coord0/coord1/row/col mean for each `DataStream` is documented in values.hpp.
#pragma once

#include <cstdint>

#include "reference/common/host_device.hpp"

namespace eps::data {

struct PhiloxCounter {
  std::uint32_t v[4];
};
struct PhiloxKey {
  std::uint32_t v[2];
};
struct PhiloxBlock {
  std::uint32_t v[4];
};

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

// One Philox4x32 round on `c` with round key `k`.
EPS_HD constexpr PhiloxCounter philox4x32_round(PhiloxCounter c, PhiloxKey k) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c.v[0];
  const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c.v[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  return PhiloxCounter{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}

// Philox4x32-10: the 4 random words for `counter` under `key`. Pure function, usable on devices.
EPS_HD constexpr PhiloxBlock philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.v[0] += kPhiloxW0;
      key.v[1] += kPhiloxW1;
    }
    counter = philox4x32_round(counter, key);
  }
  return PhiloxBlock{{counter.v[0], counter.v[1], counter.v[2], counter.v[3]}};
}

// The data streams of docs/numerics.md 2. Values are part of the data contract (they enter the counter):
// never renumber an existing stream, only append. Coordinates per stream: see values.hpp.
enum class DataStream : std::uint8_t {
  kPayload = 1,            // token payloads x [T, H] (docs/numerics.md 2.2)
  kRouterLogits = 2,       // router logits [T, E] (docs/numerics.md 2.2, docs/routing.md 3)
  kExpertWeight = 3,       // expert / shared-expert / gate weights (docs/numerics.md 2.2, docs/layer.md 4.1)
  kTopkWeight = 4,         // dispatch top-k weights [T, K]
  kRoutingSelect = 5,      // workload generators: expert selection draws per token (docs/numerics.md 2.3)
  kRoutingSlotMask = 6,    // masked:p per-slot draws
  kExpertPermutation = 7,  // zipf/drift: seeded popularity order of the experts
  kWindowPreference = 8,   // spatial:w: preferred expert set per window
  kDenoiseMask = 9,        // per-token denoising mask flags (docs/routing.md 3.4)
  kDenoiseRatio = 10,      // per-sample target mask ratio (docs/routing.md 3.4)
  kTokensPerRank = 11,     // --tokens-per-rank a:b ranges
};

inline constexpr std::uint32_t kMaxCoord1 = (1u << 24) - 1;

// Which stream and which slice of it: `coord0` is a full 32-bit coordinate (a rank or an expert),
// `coord1` a packed one that must be <= kMaxCoord1 (a layer, a step, a matrix id; see values.hpp).
struct StreamAddress {
  DataStream stream;
  std::uint32_t coord0 = 0;
  std::uint32_t coord1 = 0;
};

EPS_HD constexpr PhiloxKey seed_key(std::uint64_t seed) {
  return PhiloxKey{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
}

// The counter of the Philox block holding columns [4 * (col >> 2), 4 * (col >> 2) + 4) of `row`.
EPS_HD constexpr PhiloxCounter stream_counter(StreamAddress address, std::uint32_t row, std::uint32_t col) {
  return PhiloxCounter{{col >> 2, row, address.coord0,
                        (static_cast<std::uint32_t>(address.stream) << 24) | (address.coord1 & kMaxCoord1)}};
}

// The whole Philox block of (row, col >> 2); word `col & 3` is element (row, col). Batch fills use this
// to produce four consecutive columns per Philox evaluation.
EPS_HD constexpr PhiloxBlock stream_block(std::uint64_t seed, StreamAddress address, std::uint32_t row,
                                          std::uint32_t col) {
  return philox4x32_10(stream_counter(address, row, col), seed_key(seed));
}

// The 32 random bits of element (row, col) of stream `address` under `seed`.
EPS_HD constexpr std::uint32_t stream_bits(std::uint64_t seed, StreamAddress address, std::uint32_t row,
                                           std::uint32_t col) {
  return stream_block(seed, address, row, col).v[col & 3u];
}

// u = bits * 2^-32 in [0, 1), exact in double (every 32-bit value is representable). Mappings of
// docs/numerics.md 2.2 such as int(u * 256) are computed on the integer bits (bits >> 24) and equal the
// double formula exactly.
EPS_HD constexpr double uniform_from_bits(std::uint32_t bits) { return static_cast<double>(bits) * 0x1p-32; }

// u = (bits >> 8) * 2^-24 in [0, 1), exact in float (24 significant bits; the low 8 bits are dropped
// because a float cannot hold bits * 2^-32 exactly).
EPS_HD constexpr float uniform_float_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

// Two consecutive stream words (cols 2j and 2j + 1, the same Philox block) as one 64-bit draw.
EPS_HD constexpr std::uint64_t stream_bits64(std::uint64_t seed, StreamAddress address, std::uint32_t row,
                                             std::uint32_t pair) {
  const PhiloxBlock block = stream_block(seed, address, row, 2u * pair);
  const std::uint32_t word = (2u * pair) & 3u;
  return (static_cast<std::uint64_t>(block.v[word + 1]) << 32) | block.v[word];
}

}  // namespace eps::data
