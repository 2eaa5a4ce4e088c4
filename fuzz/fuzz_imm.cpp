// 32-bit immediates (impls/fabric/signal/imm_codec.hpp, docs/fabrics.md 6.1, 6.2) and the receive side of
// every signal strategy, which consumes the immediates a remote peer sends. The first 6 bytes pick a strategy
// and its shape (ranks, channels, tokens per put, puts per stream, seq_bits, this rank); the rest are records
// of one control byte and one little-endian immediate. Properties: every immediate a strategy could send
// decodes and re-encodes to itself, a count payload splits and re-joins to itself, kinds 2 and 3 are refused;
// a strategy refuses bad immediates as bad input and never crashes, whatever order or values arrive, and
// its queries (signal_arrived, stream_complete, describe_wait, retire) stay safe after every immediate.
#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "impls/fabric/signal/imm_codec.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"

namespace {

namespace fabric = eps::fabric;

void check_codec(std::uint32_t imm) {
  const eps::Result<fabric::ImmFields> fields = fabric::decode_imm(imm);
  if (!fields.ok()) {
    EPS_FUZZ_CHECK((imm >> 30) > 1 && eps::fuzz::is_bad_input(fields.status()), fields.status().message());
    return;
  }
  const eps::Result<std::uint32_t> encoded = fabric::encode_imm(*fields);
  EPS_FUZZ_CHECK(encoded.ok() && *encoded == imm, fmt::format("{:#010x}", imm));
  const std::uint32_t payload = fields->payload;
  const eps::Result<std::uint32_t> count =
      fabric::encode_count_payload(fabric::payload_channel(payload), fabric::payload_tokens(payload));
  EPS_FUZZ_CHECK(count.ok() && *count == payload, fmt::format("payload {:#x}", payload));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 6) return 0;
  static const char* const kNames[] = {"fabric-order", "imm-seq", "recv-count", "sender-barrier", "auto"};
  fabric::SignalShape shape;
  shape.ranks = 1 + data[1] % 64;
  shape.channels = 1 + data[2] % 16;
  shape.max_tokens_per_put = 1 + data[3] % 64;
  shape.max_puts_per_stream = 1 + data[4] % 8;
  shape.seq_bits = 2 + (data[0] >> 3) % 22;
  const int rank = data[5] % shape.ranks;
  const bool ordered = (data[0] & 0x80) != 0;
  auto made = fabric::make_signal_strategy(kNames[data[0] % 5], ordered, /*allow_unsafe=*/true, shape, rank);
  if (!made.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(made.status()), made.status().message());
    for (std::size_t i = 6; i + 4 <= size; i += 4) {
      check_codec(static_cast<std::uint32_t>(data[i]) | static_cast<std::uint32_t>(data[i + 1]) << 8 |
                  static_cast<std::uint32_t>(data[i + 2]) << 16 |
                  static_cast<std::uint32_t>(data[i + 3]) << 24);
    }
    return 0;
  }
  std::unique_ptr<fabric::SignalStrategy> strategy = std::move(made).value();
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(shape.channels));
  for (std::size_t i = 6; i + 5 <= size; i += 5) {
    const std::uint8_t control = data[i];
    const std::uint32_t imm =
        static_cast<std::uint32_t>(data[i + 1]) | static_cast<std::uint32_t>(data[i + 2]) << 8 |
        static_cast<std::uint32_t>(data[i + 3]) << 16 | static_cast<std::uint32_t>(data[i + 4]) << 24;
    check_codec(imm);
    const eps::Status status = strategy->on_remote(imm);
    if (!status.ok()) {
      EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(status), status.message());
      return 0;  // a transport fails the operation here
    }
    // The (source, parity) this immediate names, when it names a valid one.
    const int source = static_cast<int>((imm >> 23) & 63u);
    const int parity = static_cast<int>((imm >> 29) & 1u);
    if (source >= shape.ranks) continue;
    std::fill(tokens.begin(), tokens.end(), static_cast<std::int32_t>(control >> 2));
    if (strategy->signal_arrived(source, parity)) {
      const bool complete = strategy->stream_complete(source, parity, tokens);
      if (complete && (control & 1) != 0) strategy->retire(source, parity);
    }
    if ((control & 2) != 0) {
      EPS_FUZZ_CHECK(!strategy->describe_wait(source, parity, tokens).empty(), "empty describe_wait");
    }
  }
  return 0;
}
