// The 16-byte command of the command channel (docs/channel.md 7.1): what a producer (a GPU warp, or a host
// thread standing in for one on the `cpu` device) asks a CPU proxy thread to do on the fabric.
//
// Layout: four 32-bit words, so that a GPU writes a command with plain 32-bit stores and publishes it with a
// release store of word 0 (docs/channel.md 7.3):
//   word 0  [3:0] type (never 0: a published word 0 is never all-zero)  [7:4] flags  [19:8] channel (expert
//   or
//           channel id, < 4096)  [31:20] destination rank (< 4096)
//   word 1  [23:0] bytes (< 2^24, fabric::kMaxPutBytes; ATOMIC: the value to add)  [31:24] zero
//   word 2  local offset in bytes (< 2^32)
//   word 3  remote offset in bytes (< 2^32)
// Types: WRITE (a put of `bytes` from the local offset to the destination's remote offset), ATOMIC (add the
// value, 0 to 2^24 - 1, to the 64-bit word at the destination's remote offset, which must be a multiple of
// 8: a fabric remote atomic add, fabric.hpp try_atomic_add; the local offset is unused), QUIET (the proxy
// posts nothing after it until every earlier command of its FIFO completed locally), BARRIER (a fabric
// barrier among the proxies). Flags are the transport's (e.g. which region pair, which parity). Widths are
// checked when a command is built: make_command (command_check.hpp, host code) returns kInvalidArgument
// naming the field and its range; nothing is truncated. This header is device-safe (no host library).
#pragma once

#include <cstdint>

#include "reference/common/host_device.hpp"

namespace eps::channel {

enum class CommandType : std::uint32_t { kWrite = 1, kAtomic = 2, kQuiet = 3, kBarrier = 4 };

inline constexpr std::uint32_t kMaxCommandRanks = 1u << 12;
inline constexpr std::uint32_t kMaxCommandChannels = 1u << 12;
inline constexpr std::uint32_t kMaxCommandFlags = 1u << 4;
inline constexpr std::uint32_t kMaxCommandBytes = (1u << 24) - 1;

struct Command {
  std::uint32_t word[4] = {0, 0, 0, 0};

  EPS_HD CommandType type() const { return static_cast<CommandType>(word[0] & 0xFu); }
  EPS_HD std::uint32_t flags() const { return (word[0] >> 4) & 0xFu; }
  EPS_HD std::uint32_t channel() const { return (word[0] >> 8) & 0xFFFu; }
  EPS_HD std::uint32_t destination() const { return word[0] >> 20; }
  EPS_HD std::uint32_t bytes() const { return word[1] & kMaxCommandBytes; }
  EPS_HD std::uint32_t local_offset() const { return word[2]; }
  EPS_HD std::uint32_t remote_offset() const { return word[3]; }
};
static_assert(sizeof(Command) == 16, "a command is 16 bytes (docs/channel.md 7.1)");

struct CommandFields {
  CommandType type = CommandType::kWrite;
  std::uint32_t flags = 0;
  std::uint32_t channel = 0;
  std::uint32_t destination = 0;
  std::uint64_t bytes = 0;  // WRITE: bytes; ATOMIC: the value
  std::uint64_t local_offset = 0;
  std::uint64_t remote_offset = 0;
};

// Packs fields already known to fit (device code, after make_command checked the shape once).
EPS_HD inline Command pack_command(const CommandFields& f) {
  Command c;
  c.word[0] = static_cast<std::uint32_t>(f.type) | (f.flags << 4) | (f.channel << 8) | (f.destination << 20);
  c.word[1] = static_cast<std::uint32_t>(f.bytes);
  c.word[2] = static_cast<std::uint32_t>(f.local_offset);
  c.word[3] = static_cast<std::uint32_t>(f.remote_offset);
  return c;
}

}  // namespace eps::channel
