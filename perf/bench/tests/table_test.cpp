// The nccl-tests-style bench table: the format is locked here, expected text written by hand.
#include "perf/bench/table.hpp"

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(BenchTable, HeaderLinesAndColumnTitles) {
  const BenchTable table("# epsuite bench dispatch\n#  preset           smoke\nnot a comment");
  // Column widths: tokens 8, bytes 13, p50 11, p99 11, algo 11, physical 11, slowest 8, #wrong 7.
  // The title line starts with '#', which takes the first column of "tokens".
  const std::string expected =
      "# epsuite bench dispatch\n"
      "#  preset           smoke\n"
      "# not a comment\n"
      "#\n"
      "# tokens"       // '#' + " tokens" (7)
      "        bytes"  // 8 spaces + 5
      "        p50"    // 8 + 3
      "        p99"    // 8 + 3
      "       algo"    // 7 + 4
      "   physical"    // 3 + 8
      " slowest"       // 1 + 7
      " #wrong\n"      // 1 + 6
      "#       "       // '#' + 7 spaces
      "          (B)"  // 10 + 3
      "       (us)"    // 7 + 4
      "       (us)"    // 7 + 4
      "     (GB/s)"    // 5 + 6
      "     (GB/s)"    // 5 + 6
      "    rank\n";    // 4 + 4, no trailing blanks
  EXPECT_EQ(table.header(), expected);
}

TEST(BenchTable, RowsAreRightAlignedWithTwoDecimals) {
  // 128 tokens x 4 x 256 B x 2 = 262144 B; 262144 B / 12.5 us = 20.97152 GB/s; 196608 B / 12.5 us = 15.72864.
  const TableRow checked{128, 262144, 12.5, 99.25, 20.97152, 15.72864, 3, 0};
  EXPECT_EQ(BenchTable::row(checked),
            "     128"       // 5 + 3
            "       262144"  // 7 + 6
            "      12.50"    // 6 + 5
            "      99.25"
            "      20.97"
            "      15.73"
            "       3"     // 7 + 1
            "      0\n");  // 6 + 1
  const TableRow unchecked{64, 131072, 8.0, 10.25, 16.384, 0.0, 0, std::nullopt};
  EXPECT_EQ(BenchTable::row(unchecked),
            "      64"
            "       131072"
            "       8.00"  // 7 + 4
            "      10.25"
            "      16.38"
            "       0.00"
            "       0"
            "    N/A\n");  // 4 + 3, not checked (no -c)
  const TableRow wrong{0, 0, 0.0, 0.0, 0.0, 0.0, 12, 4096};
  EXPECT_EQ(BenchTable::row(wrong),
            "       0            0       0.00       0.00       0.00       0.00      12   4096\n");
}

}  // namespace
}  // namespace eps
