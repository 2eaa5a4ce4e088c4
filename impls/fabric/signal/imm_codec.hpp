// The 32-bit immediates of the signal strategies (docs/fabrics.md 6.1: immediates are at most 32 bits;
// docs/fabrics.md 6.2: encoding limits are checked, never overflowed).
//
// Every immediate a signal strategy sends has this layout (bit 31 first):
//   [31:30] kind     0 = data put, 1 = signal put (3 is the fabric barrier's, fabric.hpp)
//   [29]    parity   of the transport operation the put belongs to (operations alternate buffers)
//   [28:23] source   rank of the sender, < 64
//   [22:0]  payload  by kind and strategy:
//     imm-seq data and signal puts: sequence number mod 2^seq_bits (seq_bits <= 23)
//     recv-count data puts:         [22:13] channel (local expert) < 1024, [12:0] tokens < 8192
//     signal puts of the other strategies and data puts without payload: 0
// Encoders return kInvalidArgument naming the field and its range instead of truncating.
#pragma once

#include <cstdint>

#include "reference/common/status.hpp"

namespace eps::fabric {

enum class ImmKind : std::uint32_t { kData = 0, kSignal = 1 };

inline constexpr int kImmSourceBits = 6;
inline constexpr int kImmChannelBits = 10;
inline constexpr int kImmTokenBits = 13;
inline constexpr int kImmPayloadBits = 23;
inline constexpr int kMaxImmSources = 1 << kImmSourceBits;      // 64
inline constexpr int kMaxImmChannels = 1 << kImmChannelBits;    // 1024
inline constexpr int kMaxImmTokens = (1 << kImmTokenBits) - 1;  // 8191
inline constexpr std::uint32_t kImmPayloadMask = (1u << kImmPayloadBits) - 1;

struct ImmFields {
  ImmKind kind = ImmKind::kData;
  int parity = 0;
  int source = 0;
  std::uint32_t payload = 0;
};

Result<std::uint32_t> encode_imm(const ImmFields& fields);
// Decodes any immediate; kInvalidArgument for kinds a signal strategy never sends (2 and 3).
Result<ImmFields> decode_imm(std::uint32_t imm);

// recv-count payload: channel in [0, 1023], tokens in [0, 8191].
Result<std::uint32_t> encode_count_payload(int channel, int tokens);
int payload_channel(std::uint32_t payload);
int payload_tokens(std::uint32_t payload);

}  // namespace eps::fabric
