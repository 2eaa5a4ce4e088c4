#include "impls/channel/command_check.hpp"

namespace eps::channel {
namespace {

Status fits(std::string_view field, std::uint64_t value, std::uint64_t limit) {
  if (value >= limit) return out_of_range<std::uint64_t>(field, 0, limit - 1, value);
  return Status();
}

}  // namespace

Result<Command> make_command(const CommandFields& f) {
  const auto type = static_cast<std::uint32_t>(f.type);
  if (type < static_cast<std::uint32_t>(CommandType::kWrite) ||
      type > static_cast<std::uint32_t>(CommandType::kBarrier)) {
    return invalid_argument("type", "must be WRITE (1), ATOMIC (2), QUIET (3) or BARRIER (4), got {}", type);
  }
  EPS_RETURN_IF_ERROR(fits("flags", f.flags, kMaxCommandFlags));
  EPS_RETURN_IF_ERROR(fits("channel", f.channel, kMaxCommandChannels));
  EPS_RETURN_IF_ERROR(fits("destination", f.destination, kMaxCommandRanks));
  EPS_RETURN_IF_ERROR(fits("bytes", f.bytes, std::uint64_t{kMaxCommandBytes} + 1));
  EPS_RETURN_IF_ERROR(fits("local_offset", f.local_offset, std::uint64_t{1} << 32));
  EPS_RETURN_IF_ERROR(fits("remote_offset", f.remote_offset, std::uint64_t{1} << 32));
  return pack_command(f);
}

}  // namespace eps::channel
