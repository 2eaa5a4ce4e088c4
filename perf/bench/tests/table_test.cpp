// The nccl-tests-style bench table: the format is locked here, expected text written by hand.
#include "perf/bench/table.hpp"

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(BenchTable, HeaderLinesAndColumnTitles) {
  const BenchTable table("# epsuite bench dispatch\n#  preset           smoke\nnot a comment");
  // Column widths: tokens 8, bytes 13, p50 11, p99 11, algo 11, physical 11, ceil p50 11, ceiling 11,
  // ratio 9, slowest 8, #wrong 7.
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
      "   ceil p50"    // 3 + 8
      "    ceiling"    // 4 + 7
      "    ratio"      // 4 + 5
      " slowest"       // 1 + 7
      " #wrong\n"      // 1 + 6
      "#       "       // '#' + 7 spaces
      "          (B)"  // 10 + 3
      "       (us)"    // 7 + 4
      "       (us)"    // 7 + 4
      "     (GB/s)"    // 5 + 6
      "     (GB/s)"    // 5 + 6
      "       (us)"    // 7 + 4
      "     (GB/s)"    // 5 + 6
      "         "      // ratio has no unit
      "    rank\n";    // 4 + 4, no trailing blanks
  EXPECT_EQ(table.header(), expected);
}

TEST(BenchTable, RowsAreRightAlignedWithTwoDecimals) {
  // 128 tokens x 4 x 256 B x 2 = 262144 B; 262144 B / 12.5 us = 20.97152 GB/s; 196608 B / 12.5 us = 15.72864.
  // Its ceiling: 10 us, 262144 B / 10 us = 26.2144 GB/s, ratio 10 / 12.5 = 0.8.
  const TableRow checked{128, 262144, 12.5, 99.25, 20.97152, 15.72864, 3, 0, 10.0, 26.2144, 0.8};
  EXPECT_EQ(BenchTable::row(checked),
            "     128"       // 5 + 3
            "       262144"  // 7 + 6
            "      12.50"    // 6 + 5
            "      99.25"
            "      20.97"
            "      15.73"
            "      10.00"
            "      26.21"
            "      0.8"    // 3 significant digits: 6 + 3
            "       3"     // 7 + 1
            "      0\n");  // 6 + 1
  const TableRow unchecked{64, 131072, 8.0, 10.25, 16.384, 0.0, 0, std::nullopt, std::nullopt, 0.0, 0.0};
  EXPECT_EQ(BenchTable::row(unchecked),
            "      64"
            "       131072"
            "       8.00"  // 7 + 4
            "      10.25"
            "      16.38"
            "       0.00"
            "        N/A"  // no ceiling measured: 8 + 3
            "        N/A"
            "      N/A"
            "       0"
            "    N/A\n");  // 4 + 3, not checked (no -c)
  // A transport 2000 times slower than its ceiling: 3 significant digits keep the ratio above 0.
  const TableRow slow{64, 131072, 20000.0, 30000.0, 0.0065536, 0.0, 1, std::nullopt, 10.0, 13.1072, 0.0005};
  EXPECT_EQ(BenchTable::row(slow),
            "      64       131072   20000.00   30000.00       0.01       0.00      10.00      13.11   0.0005"
            "       1    N/A\n");
  const TableRow wrong{0, 0, 0.0, 0.0, 0.0, 0.0, 12, 4096, std::nullopt, 0.0, 0.0};
  EXPECT_EQ(BenchTable::row(wrong),
            "       0            0       0.00       0.00       0.00       0.00        N/A        N/A      N/A"
            "      12   4096\n");
}

}  // namespace
}  // namespace eps
