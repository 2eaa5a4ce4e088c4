#include "perf/bench/table.hpp"

#include <string_view>

#include <fmt/format.h>

namespace eps {
namespace {

// Column widths, shared by the title lines and the rows so they always line up.
constexpr int kTokens = 8;
constexpr int kBytes = 13;
constexpr int kTime = 11;
constexpr int kBandwidth = 11;
constexpr int kSlowest = 8;
constexpr int kWrong = 7;
constexpr int kRatio = 9;

std::string ceiling_columns(const TableRow& r) {
  if (!r.ceiling_us) return fmt::format("{:>{}}{:>{}}{:>{}}", "N/A", kTime, "N/A", kBandwidth, "N/A", kRatio);
  return fmt::format("{:>{}.2f}{:>{}.2f}{:>{}.3g}", *r.ceiling_us, kTime, r.ceiling_gbps, kBandwidth,
                     r.ceiling_ratio, kRatio);
}

}  // namespace

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

BenchTable::BenchTable(std::string config_lines) : config_(hashed_lines(config_lines)) {}

std::string BenchTable::header() const {
  std::string out = config_;
  out += "#\n";
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "tokens",
                     kTokens - 1, "bytes", kBytes, "p50", kTime, "p99", kTime, "algo", kBandwidth, "physical",
                     kBandwidth, "ceil p50", kTime, "ceiling", kBandwidth, "ratio", kRatio, "slowest",
                     kSlowest, "#wrong", kWrong);
  std::string units =
      fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}", "", kTokens - 1, "(B)",
                  kBytes, "(us)", kTime, "(us)", kTime, "(GB/s)", kBandwidth, "(GB/s)", kBandwidth, "(us)",
                  kTime, "(GB/s)", kBandwidth, "", kRatio, "rank", kSlowest);
  return out + units + "\n";
}

std::string BenchTable::row(const TableRow& r) {
  const std::string wrong = r.wrong ? fmt::format("{}", *r.wrong) : "N/A";
  return fmt::format("{:>{}}{:>{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{}{:>{}}{:>{}}\n", r.tokens, kTokens,
                     r.bytes, kBytes, r.p50_us, kTime, r.p99_us, kTime, r.algo_gbps, kBandwidth,
                     r.physical_gbps, kBandwidth, ceiling_columns(r), r.slowest_rank, kSlowest, wrong,
                     kWrong);
}

namespace bench_fabric {

namespace {

// Column widths shared by the title lines and the rows.
constexpr int kSize = 10;
constexpr int kBytes = 12;
constexpr int kTime = 10;
constexpr int kRate = 10;
constexpr int kRatio = 9;
constexpr int kSlowest = 8;
constexpr int kWrong = 7;

}  // namespace

std::string fabric_table_header(const std::string& config_lines) {
  std::string out = hashed_lines(config_lines) + "#\n";
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "size",
                     kSize - 1, "bytes", kBytes, "put p50", kTime, "put", kRate, "lat p50", kTime, "lat p99",
                     kTime, "copy p50", kTime, "copy", kRate, "put/copy", kRatio, "slowest", kSlowest,
                     "#wrong", kWrong);
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "(B)", kSize - 1,
                     "(B)", kBytes, "(us)", kTime, "(GB/s)", kRate, "(us)", kTime, "(us)", kTime, "(us)",
                     kTime, "(GB/s)", kRate, "", kRatio, "rank", kSlowest);
  return out;
}

std::string fabric_table_row(const FabricRow& r) {
  const std::string wrong = r.wrong ? fmt::format("{}", *r.wrong) : "N/A";
  const double ratio = r.copy_gbps > 0 ? r.put_gbps / r.copy_gbps : 0.0;
  return fmt::format(
      "{:>{}}{:>{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}}{:>{}}\n", r.size,
      kSize, r.bytes, kBytes, r.put_p50_us, kTime, r.put_gbps, kRate, r.lat_p50_us, kTime, r.lat_p99_us,
      kTime, r.copy_p50_us, kTime, r.copy_gbps, kRate, ratio, kRatio, r.slowest_rank, kSlowest, wrong,
      kWrong);
}

}  // namespace bench_fabric
}  // namespace eps
