// The nccl-tests-style table of `epsuite bench` (docs/architecture.md house style rule 6).
//
// Layout (locked by harness/tests/table_test.cpp):
//   the config header lines, each starting with "#" (Params::header_block, preset_header_block, ...),
//   then "#" and two column-title lines, then one line per measured point. Every column is right-aligned
//   to a fixed width, columns separated by one or more spaces:
//     tokens  bytes  p50  p99  algo  physical  ceiling  ceiling  ratio  slowest  #wrong
//   tokens per rank; bytes (algo bytes of the slowest rank, docs/dispatch.md 5.6); p50 and p99 time in µs
//   with 2 decimals; algo and physical bandwidth in GB/s (1e9 B/s) with 2 decimals; the ceiling
//   (docs/results.md 9.4): its p50 in µs and its GB/s with 2 decimals and ratio = ceiling p50 / p50 with 3
//   significant digits (a transport far below the ceiling still reads as more than 0), each "N/A" when not
//   measured; the slowest rank; the number of wrong elements, or "N/A" when results were not checked (like
//   nccl-tests without -c).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eps {

struct TableRow {
  std::int64_t tokens = 0;
  std::int64_t bytes = 0;
  double p50_us = 0;
  double p99_us = 0;
  double algo_gbps = 0;
  double physical_gbps = 0;
  int slowest_rank = 0;
  std::optional<std::int64_t> wrong;  // nullopt: not checked
  std::optional<double> ceiling_us;   // nullopt: no ceiling measured
  double ceiling_gbps = 0;
  double ceiling_ratio = 0;
};

// `text` with "# " prepended to every line that does not start with '#', each line ending in a newline.
std::string hashed_lines(std::string_view text);

class BenchTable {
 public:
  // `config_lines`: text that is printed before the column titles; every line must start with '#'
  // (a line that does not gets "# " prepended) and end with a newline (added when missing).
  explicit BenchTable(std::string config_lines);

  std::string header() const;  // config lines + "#" + the two title lines
  static std::string row(const TableRow& row);

 private:
  std::string config_;
};

namespace bench_fabric {

// One table row. Columns (fixed widths, right-aligned, locked by harness/tests/bench_fabric_test.cpp):
//   size (B) | bytes (B, window * size) | put p50 (us) | put GB/s | lat p50 (us) | lat p99 (us) |
//   copy p50 (us) | copy GB/s | put/copy | slowest rank (of put-bw) | #wrong (N/A without -c)
struct FabricRow {
  std::int64_t size = 0;
  std::int64_t bytes = 0;
  double put_p50_us = 0;
  double put_gbps = 0;
  double lat_p50_us = 0;
  double lat_p99_us = 0;
  double copy_p50_us = 0;
  double copy_gbps = 0;
  int slowest_rank = 0;
  std::optional<std::int64_t> wrong;
};
// `config_lines` ('#' prepended where missing) + "#" + the two column-title lines.
std::string fabric_table_header(const std::string& config_lines);
std::string fabric_table_row(const FabricRow& row);

}  // namespace bench_fabric
}  // namespace eps
