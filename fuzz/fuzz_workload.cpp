// Workload text (--workload, reference/data/workload.hpp parse_workload) and --tokens-per-rank text
// (parse_tokens_per_rank), both fed the same input. Properties: a rejected text is bad input naming the
// parameter; an accepted workload's canonical text (workload_name) parses back to the same spec and text; an
// accepted token count spec resolves, for 1 and for 5 ranks, to counts in range (a:b inside [a, b]).
// `trace:FILE` inputs are skipped (they would read files; the trace formats have fuzz_trace).
#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "reference/data/workload.hpp"

namespace {

using eps::data::WorkloadSpec;

bool same_spec(const WorkloadSpec& a, const WorkloadSpec& b) {
  return a.pattern == b.pattern && a.zipf_s == b.zipf_s && a.hot_expert == b.hot_expert &&
         a.hot_fraction == b.hot_fraction && a.mask_p == b.mask_p && a.window == b.window &&
         a.steps == b.steps;
}

void check_workload(std::string_view text) {
  if (text.find("trace") != std::string_view::npos) return;
  const eps::Result<WorkloadSpec> spec = eps::data::parse_workload(text);
  if (!spec.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(spec.status()), spec.status().message());
    return;
  }
  const std::string name = eps::data::workload_name(*spec);
  const eps::Result<WorkloadSpec> again = eps::data::parse_workload(name);
  EPS_FUZZ_CHECK(again.ok(), fmt::format("'{}' is rejected: {}", name, again.status().message()));
  EPS_FUZZ_CHECK(same_spec(*spec, *again) && eps::data::workload_name(*again) == name, name);
}

void check_tokens_per_rank(std::string_view text) {
  using Kind = eps::data::TokensPerRankSpec::Kind;
  const eps::Result<eps::data::TokensPerRankSpec> spec = eps::data::parse_tokens_per_rank(text);
  if (!spec.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(spec.status()), spec.status().message());
    return;
  }
  for (const std::int64_t v : spec->values) {
    EPS_FUZZ_CHECK(v >= 0 && v <= eps::data::kMaxTokensPerRank, fmt::format("count {}", v));
  }
  for (const int ranks : {1, 5}) {
    const auto counts = eps::data::resolve_tokens_per_rank(*spec, ranks, 7);
    if (spec->kind == Kind::kList && spec->values.size() != static_cast<std::size_t>(ranks)) {
      EPS_FUZZ_CHECK(!counts.ok(), "a list of the wrong length resolved");
      continue;
    }
    EPS_FUZZ_CHECK(counts.ok() && counts->size() == static_cast<std::size_t>(ranks),
                   counts.status().message());
    const std::int64_t lo = spec->kind == Kind::kRange ? spec->values[0] : 0;
    const std::int64_t hi = spec->kind == Kind::kRange ? spec->values[1] : eps::data::kMaxTokensPerRank;
    for (const std::int64_t c : *counts) EPS_FUZZ_CHECK(c >= lo && c <= hi, fmt::format("count {}", c));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = eps::fuzz::text_of(data, size);
  check_workload(text);
  check_tokens_per_rank(text);
  return 0;
}
