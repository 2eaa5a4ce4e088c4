// The 16-byte command (docs/channel.md 7.1): fields round-trip at their limits, and every field one past its
// width is refused by name (nothing is truncated).
#include <gtest/gtest.h>

#include "impls/channel/command_check.hpp"

namespace eps::channel {
namespace {

TEST(Command, FieldsRoundTripAtTheirLimits) {
  const CommandFields f{CommandType::kAtomic, 15, 4095, 4095, kMaxCommandBytes, 0xFFFFFFFFu, 0x80000001u};
  const Command c = make_command(f).value();
  EXPECT_EQ(c.type(), CommandType::kAtomic);
  EXPECT_EQ(c.flags(), 15u);
  EXPECT_EQ(c.channel(), 4095u);
  EXPECT_EQ(c.destination(), 4095u);
  EXPECT_EQ(c.bytes(), kMaxCommandBytes);
  EXPECT_EQ(c.local_offset(), 0xFFFFFFFFu);
  EXPECT_EQ(c.remote_offset(), 0x80000001u);
  const Command small = make_command({CommandType::kWrite, 2, 7, 3, 4096, 16, 32}).value();
  EXPECT_EQ(small.word[0], 1u | (2u << 4) | (7u << 8) | (3u << 20));
  EXPECT_EQ(small.word[1], 4096u);
  EXPECT_NE(small.word[0], 0u);  // the publish word of docs/channel.md 7.3
}

TEST(Command, WidthsAreCheckedByName) {
  auto message = [](CommandFields f) { return make_command(f).status().message(); };
  EXPECT_EQ(message({CommandType::kWrite, 16, 0, 0, 0, 0, 0}), "flags: must be in [0, 15], got 16");
  EXPECT_EQ(message({CommandType::kWrite, 0, 4096, 0, 0, 0, 0}), "channel: must be in [0, 4095], got 4096");
  EXPECT_EQ(message({CommandType::kWrite, 0, 0, 4096, 0, 0, 0}),
            "destination: must be in [0, 4095], got 4096");
  EXPECT_EQ(message({CommandType::kWrite, 0, 0, 0, 1u << 24, 0, 0}),
            "bytes: must be in [0, 16777215], got 16777216");
  EXPECT_EQ(message({CommandType::kWrite, 0, 0, 0, 0, std::uint64_t{1} << 32, 0}),
            "local_offset: must be in [0, 4294967295], got 4294967296");
  EXPECT_EQ(message({CommandType::kWrite, 0, 0, 0, 0, 0, std::uint64_t{1} << 32}),
            "remote_offset: must be in [0, 4294967295], got 4294967296");
  EXPECT_EQ(message({static_cast<CommandType>(0), 0, 0, 0, 0, 0, 0}),
            "type: must be WRITE (1), ATOMIC (2), QUIET (3) or BARRIER (4), got 0");
  EXPECT_EQ(message({static_cast<CommandType>(5), 0, 0, 0, 0, 0, 0}),
            "type: must be WRITE (1), ATOMIC (2), QUIET (3) or BARRIER (4), got 5");
}

}  // namespace
}  // namespace eps::channel
