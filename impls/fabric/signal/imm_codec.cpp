#include "impls/fabric/signal/imm_codec.hpp"

namespace eps::fabric {
namespace {

constexpr int kKindShift = 30;
constexpr int kParityShift = 29;
constexpr int kSourceShift = 23;

}  // namespace

Result<std::uint32_t> encode_imm(const ImmFields& f) {
  if (f.kind != ImmKind::kData && f.kind != ImmKind::kSignal) {
    return invalid_argument("imm.kind", "must be data (0) or signal (1), got {}", static_cast<int>(f.kind));
  }
  if (f.parity != 0 && f.parity != 1) return out_of_range("imm.parity", 0, 1, f.parity);
  if (f.source < 0 || f.source >= kMaxImmSources)
    return out_of_range("imm.source", 0, kMaxImmSources - 1, f.source);
  if (f.payload > kImmPayloadMask)
    return out_of_range<std::uint32_t>("imm.payload", 0, kImmPayloadMask, f.payload);
  return (static_cast<std::uint32_t>(f.kind) << kKindShift) |
         (static_cast<std::uint32_t>(f.parity) << kParityShift) |
         (static_cast<std::uint32_t>(f.source) << kSourceShift) | f.payload;
}

Result<ImmFields> decode_imm(std::uint32_t imm) {
  const std::uint32_t kind = imm >> kKindShift;
  if (kind > 1) return invalid_argument("imm", "{:#010x} has kind {}, not data (0) or signal (1)", imm, kind);
  return ImmFields{static_cast<ImmKind>(kind), static_cast<int>((imm >> kParityShift) & 1u),
                   static_cast<int>((imm >> kSourceShift) & (kMaxImmSources - 1)), imm & kImmPayloadMask};
}

Result<std::uint32_t> encode_count_payload(int channel, int tokens) {
  if (channel < 0 || channel >= kMaxImmChannels)
    return out_of_range("imm.channel", 0, kMaxImmChannels - 1, channel);
  if (tokens < 0 || tokens > kMaxImmTokens) return out_of_range("imm.tokens", 0, kMaxImmTokens, tokens);
  return (static_cast<std::uint32_t>(channel) << kImmTokenBits) | static_cast<std::uint32_t>(tokens);
}

int payload_channel(std::uint32_t payload) { return static_cast<int>(payload >> kImmTokenBits); }
int payload_tokens(std::uint32_t payload) { return static_cast<int>(payload & ((1u << kImmTokenBits) - 1)); }

}  // namespace eps::fabric
