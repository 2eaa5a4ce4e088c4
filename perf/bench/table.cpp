#include "perf/bench/table.hpp"

#include <fmt/format.h>

#include "results/op_fields.hpp"

namespace eps {
namespace {

std::string cell_text(const Cell& cell, std::string_view format) {
  if (std::holds_alternative<std::monostate>(cell)) return "N/A";
  if (const auto* text = std::get_if<std::string>(&cell)) return *text;
  if (const auto* integer = std::get_if<std::int64_t>(&cell))
    return fmt::format(fmt::runtime(format), *integer);
  return fmt::format(fmt::runtime(format), std::get<double>(cell));
}

std::string without_trailing_blanks(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

Cell optional_cell(const std::optional<std::int64_t>& value) { return value ? Cell(*value) : Cell(); }

}  // namespace

std::string TableLayout::titles() const {
  std::string title = "#";
  std::string unit = "#";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const int width = i == 0 ? columns[i].width + indent - 1 : columns[i].width;
    const std::string_view before = i == 0 ? std::string_view() : separator;
    title += fmt::format("{}{:>{}}", before, columns[i].title, width);
    unit += fmt::format("{}{:>{}}", before, columns[i].unit, width);
  }
  return without_trailing_blanks(title) + without_trailing_blanks(unit);
}

std::string TableLayout::row(std::span<const Cell> cells) const {
  std::string out(static_cast<std::size_t>(indent), ' ');
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string text = i < cells.size() ? cell_text(cells[i], columns[i].format) : "N/A";
    out += fmt::format("{}{:>{}}", i == 0 ? std::string_view() : separator, text, columns[i].width);
  }
  return out + "\n";
}

std::string hashed_lines(std::string_view text) {
  std::string out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    out += line.starts_with('#') ? std::string(line) : "# " + std::string(line);
    out += '\n';
    begin = end + 1;
  }
  return out;
}

std::string table_header(std::string_view config_lines, const TableLayout& layout) {
  return hashed_lines(config_lines) + "#\n" + layout.titles();
}

const TableLayout& transport_table() {
  static const TableLayout layout{{{"tokens", "", 8},
                                   {"bytes", "(B)", 13},
                                   {"p50", "(us)", 11, "{:.2f}"},
                                   {"p99", "(us)", 11, "{:.2f}"},
                                   {"algo", "(GB/s)", 11, "{:.2f}"},
                                   {"physical", "(GB/s)", 11, "{:.2f}"},
                                   {"ceil p50", "(us)", 11, "{:.2f}", CellSource::kCeilingUs},
                                   {"ceiling", "(GB/s)", 11, "{:.2f}", CellSource::kCeilingGbps},
                                   {"ratio", "", 9, "{:.3g}", CellSource::kCeilingRatio},
                                   {"slowest", "rank", 8, "{}", CellSource::kSlowestRank},
                                   {"#wrong", "", 7, "{}", CellSource::kWrong}},
                                  0,
                                  ""};
  return layout;
}

BenchTable::BenchTable(std::string config_lines) : config_(std::move(config_lines)) {}

std::string BenchTable::header() const { return table_header(config_, transport_table()); }

std::string BenchTable::row(const TableRow& r) {
  const bool ceiling = r.ceiling_us.has_value();
  const Cell cells[] = {r.tokens,
                        r.bytes,
                        r.p50_us,
                        r.p99_us,
                        r.algo_gbps,
                        r.physical_gbps,
                        ceiling ? Cell(*r.ceiling_us) : Cell(),
                        ceiling ? Cell(r.ceiling_gbps) : Cell(),
                        ceiling ? Cell(r.ceiling_ratio) : Cell(),
                        std::int64_t{r.slowest_rank},
                        optional_cell(r.wrong)};
  return transport_table().row(cells);
}

const TableLayout& fabric_table() {
  static const TableLayout layout{{{"size", "(B)", 10},
                                   {"bytes", "(B)", 12},
                                   {"put p50", "(us)", 10, "{:.2f}"},
                                   {"put", "(GB/s)", 10, "{:.2f}"},
                                   {"lat p50", "(us)", 10, "{:.2f}"},
                                   {"lat p99", "(us)", 10, "{:.2f}"},
                                   {"copy p50", "(us)", 10, "{:.2f}"},
                                   {"copy", "(GB/s)", 10, "{:.2f}"},
                                   {"put/copy", "", 9, "{:.2f}"},
                                   {"slowest", "rank", 8, "{}", CellSource::kSlowestRank},
                                   {"#wrong", "", 7, "{}", CellSource::kWrong}},
                                  0,
                                  ""};
  return layout;
}

const TableLayout& layer_table() {
  static const TableLayout table = [] {
    TableLayout table{{{"mask", "ratio", 6, "{:.3f}"},
                       {"tokens", "/rank", 8},
                       {"step p50", "(us)", 12, "{:.2f}"},
                       {"tokens/s", "", 12, "{:.0f}"}},
                      1,
                      " "};
    for (const char* phase : kLayerPhases) table.columns.push_back({phase, "(us)", 10, "{:.2f}"});
    table.columns.insert(table.columns.end(), {{"dropped", "", 9},
                                               {"beta", "(min)", 6, "{:.3f}"},
                                               {"ceil p50", "(us)", 10, "{:.2f}", CellSource::kCeilingUs},
                                               {"ceil/", "step", 9, "{:.3g}", CellSource::kCeilingRatio},
                                               {"#wrong", "", 7, "{}", CellSource::kWrong}});
    return table;
  }();
  return table;
}

const TableLayout& eplb_table() {
  static const TableLayout table{{{"window", "", 6},
                                  {"steps", "", 11},
                                  {"plan", "", 5},
                                  {"beta", "pred", 6, "{:.3f}"},
                                  {"beta", "real", 6, "{:.3f}"},
                                  {"beta", "rows", 6, "{:.3f}"},
                                  {"step mean", "(us)", 11, "{:.1f}"},
                                  {"step max", "(us)", 11, "{:.1f}"},
                                  {"boundary", "max (us)", 11, "{:.1f}"},
                                  {"switch", "", 6},
                                  {"moved", "rank/node/x", 12},
                                  {"moved", "(MB)", 8, "{:.3f}"},
                                  {"stall", "(us)", 10, "{:.1f}"},
                                  {"planner", "(us)", 10, "{:.1f}"},
                                  {"#wrong", "", 7, "{}", CellSource::kWrong}},
                                 1,
                                 " "};
  return table;
}

namespace bench_fabric {

double put_copy_ratio(double put_gbps, double copy_gbps) {
  return copy_gbps > 0 ? put_gbps / copy_gbps : 0.0;
}

std::string fabric_table_header(const std::string& config_lines) {
  return table_header(config_lines, fabric_table());
}

std::string fabric_table_row(const FabricRow& r) {
  const Cell cells[] = {r.size,
                        r.bytes,
                        r.put_p50_us,
                        r.put_gbps,
                        r.lat_p50_us,
                        r.lat_p99_us,
                        r.copy_p50_us,
                        r.copy_gbps,
                        put_copy_ratio(r.put_gbps, r.copy_gbps),
                        std::int64_t{r.slowest_rank},
                        optional_cell(r.wrong)};
  return fabric_table().row(cells);
}

}  // namespace bench_fabric
}  // namespace eps
