#include <charconv>

#include "reference/data/philox.hpp"
#include "reference/data/workload.hpp"

namespace eps::data {
namespace {

constexpr std::string_view kField = "tokens-per-rank";

Result<std::int64_t> parse_count(std::string_view text, std::string_view what) {
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return invalid_argument(kField, "{}: expected an integer in [0, {}], got '{}'", what, kMaxTokensPerRank,
                            text);
  }
  if (value < 0 || value > kMaxTokensPerRank) {
    return invalid_argument(kField, "{}: must be in [0, {}], got {}", what, kMaxTokensPerRank, value);
  }
  return value;
}

}  // namespace

Result<TokensPerRankSpec> parse_tokens_per_rank(std::string_view text) {
  TokensPerRankSpec spec;
  if (const std::size_t colon = text.find(':'); colon != std::string_view::npos) {
    spec.kind = TokensPerRankSpec::Kind::kRange;
    EPS_ASSIGN_OR_RETURN(const std::int64_t lo, parse_count(text.substr(0, colon), "range start a (a:b)"));
    EPS_ASSIGN_OR_RETURN(const std::int64_t hi, parse_count(text.substr(colon + 1), "range end b (a:b)"));
    if (lo > hi) return invalid_argument(kField, "range a:b needs a <= b, got {}:{}", lo, hi);
    spec.values = {lo, hi};
    return spec;
  }
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view item =
        text.substr(begin, comma == std::string_view::npos ? text.npos : comma - begin);
    EPS_ASSIGN_OR_RETURN(const std::int64_t value,
                         parse_count(item, fmt::format("entry {}", spec.values.size())));
    spec.values.push_back(value);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  spec.kind = spec.values.size() == 1 ? TokensPerRankSpec::Kind::kFixed : TokensPerRankSpec::Kind::kList;
  return spec;
}

Result<std::vector<std::int64_t>> resolve_tokens_per_rank(const TokensPerRankSpec& spec, int num_ranks,
                                                          std::uint64_t seed) {
  if (num_ranks < 1) return out_of_range("num_ranks", 1, 1 << 20, num_ranks);
  const auto ranks = static_cast<std::size_t>(num_ranks);
  switch (spec.kind) {
    case TokensPerRankSpec::Kind::kFixed:
      return std::vector<std::int64_t>(ranks, spec.values.at(0));
    case TokensPerRankSpec::Kind::kList:
      if (spec.values.size() != ranks) {
        return invalid_argument(kField, "a list needs 1 or num_ranks = {} entries, got {}", num_ranks,
                                spec.values.size());
      }
      return spec.values;
    case TokensPerRankSpec::Kind::kRange: {
      // T_r = a + floor(u * (b - a + 1)) with a 64-bit u from (seed, rank): rank r's count ignores R.
      const std::uint64_t lo = static_cast<std::uint64_t>(spec.values.at(0));
      const std::uint64_t span = static_cast<std::uint64_t>(spec.values.at(1)) - lo + 1;
      std::vector<std::int64_t> counts(ranks);
      for (std::size_t r = 0; r < ranks; ++r) {
        const std::uint64_t u =
            stream_bits64(seed, {DataStream::kTokensPerRank, 0, 0}, static_cast<std::uint32_t>(r), 0);
        __extension__ using U128 = unsigned __int128;
        counts[r] =
            static_cast<std::int64_t>(lo + static_cast<std::uint64_t>((static_cast<U128>(u) * span) >> 64));
      }
      return counts;
    }
  }
  return invalid_argument(kField, "unknown kind");
}

}  // namespace eps::data
