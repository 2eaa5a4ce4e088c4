// --repeat-check's comparison (impls/problem/repeat_check.hpp): identical outputs agree; one flipped byte is
// named by buffer, row and byte; a differing size is itself the difference.
#include <gtest/gtest.h>

#include "impls/problem/repeat_check.hpp"

namespace eps::problem {
namespace {

ProblemShape small_shape() {
  ProblemShape shape;
  shape.ranks = 2;
  shape.experts = 4;
  shape.top_k = 2;
  shape.hidden = 128;
  shape.max_tokens = 4;
  return shape;
}

TEST(RepeatCheck, IdenticalOutputsAgree) {
  const ProblemShape shape = small_shape();
  const DispatchBuffers a(transport::Layout::kHtRankMajor, shape);
  const DispatchBuffers b(transport::Layout::kHtRankMajor, shape);
  EXPECT_EQ(first_difference(dispatch_outputs(a, shape), dispatch_outputs(b, shape)), std::nullopt);
}

TEST(RepeatCheck, NamesTheFirstDifferingRowAndByte) {
  const ProblemShape shape = small_shape();
  const DispatchBuffers a(transport::Layout::kHtRankMajor, shape);
  DispatchBuffers b(transport::Layout::kHtRankMajor, shape);
  const std::size_t row_bytes = 2 * 128;           // one bf16 row of H = 128
  b.recv_x[3 * row_bytes + 17] = std::byte{0x40};  // 0xff before
  b.recv_topk_idx[1] = 5;                          // a later buffer: not the first difference
  EXPECT_EQ(first_difference(dispatch_outputs(a, shape), dispatch_outputs(b, shape)),
            "dispatch recv_x: row 3, byte 17 (offset 785): 0xff in the first run, 0x40 in the second");
}

TEST(RepeatCheck, ADifferentSizeIsTheDifference) {
  const std::vector<std::byte> four(4), five(5);
  const std::vector<OutputBuffer> a = {{"combine out", four, 2}};
  const std::vector<OutputBuffer> b = {{"combine out", five, 2}};
  EXPECT_EQ(first_difference(a, b),
            "buffer 0: combine out (4 bytes) in the first run, combine out (5 bytes) in the second");
}

}  // namespace
}  // namespace eps::problem
