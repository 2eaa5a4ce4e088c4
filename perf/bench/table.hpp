// The nccl-tests-style tables of `epsuite bench` (docs/architecture.md house style rule 6).
//
// A TableLayout is a list of columns, each with two title lines (the title and its unit), a fixed width and
// the format of its numbers; every cell is right-aligned to its column's width. Rows start with `indent`
// spaces and separate cells with `separator`; the title lines start with '#' in place of the row's first
// character and carry no trailing blanks. A cell is a number (formatted with the column's format), a text, or
// N/A (not measured, not checked). A column's `source` says who gives its cells: the op (kOp, in column
// order) or the driver, from what it measured (perf/bench/driver.hpp): the ceiling's p50, GB/s and ratio
// (docs/results.md 9.4), the slowest rank and #wrong.
//
// The transport ops' table (transport_table, locked by perf/bench/tests/table_test.cpp):
//     tokens  bytes  p50  p99  algo  physical  ceil p50  ceiling  ratio  slowest  #wrong
//   tokens per rank; bytes (algo bytes of the slowest rank, docs/dispatch.md 5.6); p50 and p99 time in µs
//   with 2 decimals; algo and physical bandwidth in GB/s (1e9 B/s) with 2 decimals; the ceiling: its p50 in
//   µs and its GB/s with 2 decimals and ratio = ceiling p50 / p50 with 3 significant digits (a transport far
//   below the ceiling still reads as more than 0), each "N/A" when not measured; the slowest rank; the number
//   of wrong elements, or "N/A" when results were not checked (like nccl-tests without -c).
// The layer table (layer_table): mask ratio, tokens per rank, p50 of the stack (µs), tokens/s over all ranks,
//   the five phases' medians (µs), dropped (token, slot) pairs (token choice) or dropped tokens (expert
//   choice) summed over layers, β of the least balanced layer, the ceiling's p50 (µs) and ceiling p50 / step
//   p50 (3 significant digits: a step is mostly compute; N/A when not measured), #wrong.
// The EPLB table (eplb_table): window, its steps, the plan in force at its end, β predicted / realized (even
//   split) / of the computed rows, mean and max step time (µs), the largest boundary (µs), switches, moved
//   experts (same rank / same node / cross node) and MB, the stall of the switches and the planner's run time
//   (µs), #wrong.
// The fabric table (fabric_table, locked by perf/bench/tests/bench_fabric_test.cpp):
//   size (B) | bytes (B, window * size) | put p50 (us) | put GB/s | lat p50 (us) | lat p99 (us) |
//   copy p50 (us) | copy GB/s | put/copy | slowest rank (of put-bw) | #wrong (N/A without -c)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace eps {

// N/A, an integer, a number or a text.
using Cell = std::variant<std::monostate, std::int64_t, double, std::string>;

enum class CellSource { kOp, kCeilingUs, kCeilingGbps, kCeilingRatio, kSlowestRank, kWrong };

struct Column {
  std::string_view title;
  std::string_view unit;
  int width = 0;
  std::string_view format = "{}";  // of a number cell
  CellSource source = CellSource::kOp;
};

struct TableLayout {
  std::vector<Column> columns;
  int indent = 0;
  std::string_view separator;

  std::string titles() const;                          // the two title lines
  std::string row(std::span<const Cell> cells) const;  // one cell per column
};

// `text` with "# " prepended to every line that does not start with '#', each line ending in a newline.
std::string hashed_lines(std::string_view text);
// `config_lines` ('#' prepended where missing) + "#" + the layout's title lines.
std::string table_header(std::string_view config_lines, const TableLayout& layout);

// The transport ops' table (above).
const TableLayout& transport_table();

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

// The transport table with its config lines, and one of its rows.
class BenchTable {
 public:
  explicit BenchTable(std::string config_lines);
  std::string header() const;
  static std::string row(const TableRow& row);

 private:
  std::string config_;
};

// The layer, EPLB and fabric tables (above).
const TableLayout& layer_table();
const TableLayout& eplb_table();
const TableLayout& fabric_table();

namespace bench_fabric {

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
// put GB/s / copy GB/s; 0 without a copy rate.
double put_copy_ratio(double put_gbps, double copy_gbps);
std::string fabric_table_header(const std::string& config_lines);
std::string fabric_table_row(const FabricRow& row);

}  // namespace bench_fabric
}  // namespace eps
