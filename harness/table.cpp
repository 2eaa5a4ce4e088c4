#include "harness/table.hpp"

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

std::string normalize(std::string_view text) {
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

}  // namespace

BenchTable::BenchTable(std::string config_lines) : config_(normalize(config_lines)) {}

std::string BenchTable::header() const {
  std::string out = config_;
  out += "#\n";
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "tokens", kTokens - 1, "bytes",
                     kBytes, "p50", kTime, "p99", kTime, "algo", kBandwidth, "physical", kBandwidth,
                     "slowest", kSlowest, "#wrong", kWrong);
  std::string units =
      fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}", "", kTokens - 1, "(B)", kBytes, "(us)",
                  kTime, "(us)", kTime, "(GB/s)", kBandwidth, "(GB/s)", kBandwidth, "rank", kSlowest);
  return out + units + "\n";
}

std::string BenchTable::row(const TableRow& r) {
  const std::string wrong = r.wrong ? fmt::format("{}", *r.wrong) : "N/A";
  return fmt::format("{:>{}}{:>{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}}{:>{}}\n", r.tokens, kTokens,
                     r.bytes, kBytes, r.p50_us, kTime, r.p99_us, kTime, r.algo_gbps, kBandwidth,
                     r.physical_gbps, kBandwidth, r.slowest_rank, kSlowest, wrong, kWrong);
}

}  // namespace eps
