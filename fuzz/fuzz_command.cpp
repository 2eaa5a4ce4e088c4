// The 16-byte channel command (impls/channel/command.hpp, docs/channel.md 7.1): what a proxy thread decodes
// from its FIFO, and make_command, the checked encoder. Input: a command's 16 bytes, then fields for the
// encoder. Properties: a command with a valid type decodes to fields that make_command re-encodes to the same
// 16 bytes (word 1's unused top byte aside); an invalid type is refused; fields make_command accepts decode
// back to themselves, and fields it refuses are out of their documented widths.
#include <cstring>

#include <fmt/format.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz/fuzz_util.hpp"
#include "impls/channel/command_check.hpp"

namespace {

namespace channel = eps::channel;

channel::CommandFields fields_of(const channel::Command& c) {
  return {c.type(), c.flags(), c.channel(), c.destination(), c.bytes(), c.local_offset(), c.remote_offset()};
}

bool fits(const channel::CommandFields& f) {
  const auto type = static_cast<std::uint32_t>(f.type);
  return type >= 1 && type <= 4 && f.flags < channel::kMaxCommandFlags &&
         f.channel < channel::kMaxCommandChannels && f.destination < channel::kMaxCommandRanks &&
         f.bytes <= channel::kMaxCommandBytes && f.local_offset < (std::uint64_t{1} << 32) &&
         f.remote_offset < (std::uint64_t{1} << 32);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < sizeof(channel::Command)) return 0;
  channel::Command decoded;
  std::memcpy(decoded.word, data, sizeof decoded.word);
  const eps::Result<channel::Command> again = channel::make_command(fields_of(decoded));
  const auto type = static_cast<std::uint32_t>(decoded.type());
  if (type < 1 || type > 4) {
    EPS_FUZZ_CHECK(!again.ok() && eps::fuzz::is_bad_input(again.status()), fmt::format("type {}", type));
  } else {
    EPS_FUZZ_CHECK(again.ok(), again.status().message());
    channel::Command expected = decoded;
    expected.word[1] &= channel::kMaxCommandBytes;
    EPS_FUZZ_CHECK(std::memcmp(again->word, expected.word, sizeof expected.word) == 0,
                   fmt::format("{:#x} {:#x} {:#x} {:#x}", decoded.word[0], decoded.word[1], decoded.word[2],
                               decoded.word[3]));
  }

  FuzzedDataProvider provider(data + sizeof decoded.word, size - sizeof decoded.word);
  channel::CommandFields fields;
  fields.type = static_cast<channel::CommandType>(provider.ConsumeIntegralInRange<std::uint32_t>(0, 16));
  fields.flags = provider.ConsumeIntegralInRange<std::uint32_t>(0, 2 * channel::kMaxCommandFlags);
  fields.channel = provider.ConsumeIntegralInRange<std::uint32_t>(0, 2 * channel::kMaxCommandChannels);
  fields.destination = provider.ConsumeIntegralInRange<std::uint32_t>(0, 2 * channel::kMaxCommandRanks);
  fields.bytes = provider.ConsumeIntegral<std::uint64_t>() >> provider.ConsumeIntegralInRange(0, 63);
  fields.local_offset = provider.ConsumeIntegral<std::uint64_t>() >> provider.ConsumeIntegralInRange(0, 63);
  fields.remote_offset = provider.ConsumeIntegral<std::uint64_t>() >> provider.ConsumeIntegralInRange(0, 63);
  const eps::Result<channel::Command> made = channel::make_command(fields);
  EPS_FUZZ_CHECK(made.ok() == fits(fields),
                 made.ok() ? "out-of-range fields accepted" : made.status().message());
  if (made.ok()) {
    const channel::CommandFields back = fields_of(*made);
    EPS_FUZZ_CHECK(back.type == fields.type && back.flags == fields.flags && back.channel == fields.channel &&
                       back.destination == fields.destination && back.bytes == fields.bytes &&
                       back.local_offset == fields.local_offset && back.remote_offset == fields.remote_offset,
                   "fields changed on the way through a command");
  }
  return 0;
}
