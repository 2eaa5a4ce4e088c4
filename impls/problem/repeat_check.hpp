// --repeat-check (docs/results.md 9.8): a case run twice on identical inputs must give the same outputs bit
// for bit, with no reference needed. The outputs are named byte buffers cut into rows; the first difference
// names the buffer, the row and the byte.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "impls/problem/transport_problem.hpp"

namespace eps::problem {

struct OutputBuffer {
  std::string name;  // "dispatch recv_x"
  std::span<const std::byte> bytes;
  std::size_t row_bytes = 1;  // > 0: the bytes of one row (a received row, a token, a local expert)
};

// Every buffer of a dispatch's output, with the row sizes of `shape` (docs/dispatch.md 5.2-5.4).
std::vector<OutputBuffer> dispatch_outputs(const DispatchBuffers& buffers, const ProblemShape& shape);

// The first difference between two runs' outputs, buffer by buffer in order: "dispatch recv_x: row 3, byte 17
// (offset 785): 0x3f in the first run, 0x40 in the second"; nullopt when every byte agrees. Buffers are
// paired by position; a differing name or size is itself the difference.
std::optional<std::string> first_difference(std::span<const OutputBuffer> first,
                                            std::span<const OutputBuffer> second);

}  // namespace eps::problem
