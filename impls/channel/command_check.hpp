// Building a command with its field widths checked (command.hpp): host code, where a bad shape must be an
// error naming the field rather than a silently truncated command.
#pragma once

#include "impls/channel/command.hpp"
#include "reference/common/status.hpp"

namespace eps::channel {

// The command of `fields`, or kInvalidArgument naming the first field out of its range.
Result<Command> make_command(const CommandFields& fields);

}  // namespace eps::channel
