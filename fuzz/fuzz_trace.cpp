// Routing traces (reference/data/workload.hpp RoutingTrace), the files `--workload trace:FILE` replays. The
// first byte picks the format (even: JSON, odd: CSV), the rest is the file. Properties: a rejected file is
// bad input; an accepted trace written back in its own format (trace_to_json / trace_to_csv) parses to the
// same trace, and written in the other format it parses to the same tokens (CSV records neither E nor
// trailing zero-token ranks, so those are compared as the formats define them).
#include <algorithm>

#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "reference/data/workload.hpp"

namespace {

using eps::data::RoutingTrace;

bool same_trace(const RoutingTrace& a, const RoutingTrace& b) {
  return a.num_experts == b.num_experts && a.top_k == b.top_k && a.ranks == b.ranks;
}

// Ranks up to the last one with a token: what CSV can record.
std::vector<std::vector<std::int32_t>> recorded_ranks(const RoutingTrace& t) {
  std::vector<std::vector<std::int32_t>> ranks = t.ranks;
  while (!ranks.empty() && ranks.back().empty()) ranks.pop_back();
  return ranks;
}

void check_json(std::string_view text) {
  const eps::Result<RoutingTrace> trace = eps::data::parse_trace_json(text, "<fuzz>.json");
  if (!trace.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(trace.status()), trace.status().message());
    return;
  }
  const std::string json = eps::data::trace_to_json(*trace);
  const eps::Result<RoutingTrace> again = eps::data::parse_trace_json(json, "<rewritten>.json");
  EPS_FUZZ_CHECK(again.ok() && same_trace(*again, *trace), json);
  const auto ranks = recorded_ranks(*trace);
  if (ranks.empty()) return;  // CSV needs at least one token line
  const std::string csv = eps::data::trace_to_csv(*trace);
  const eps::Result<RoutingTrace> as_csv = eps::data::parse_trace_csv(csv, "<rewritten>.csv");
  EPS_FUZZ_CHECK(as_csv.ok() && as_csv->top_k == trace->top_k && as_csv->ranks == ranks, csv);
}

void check_csv(std::string_view text) {
  const eps::Result<RoutingTrace> trace = eps::data::parse_trace_csv(text, "<fuzz>.csv");
  if (!trace.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(trace.status()), trace.status().message());
    return;
  }
  EPS_FUZZ_CHECK(trace->num_experts == 0 && trace->top_k >= 1, "CSV records no E");
  const std::string csv = eps::data::trace_to_csv(*trace);
  const eps::Result<RoutingTrace> again = eps::data::parse_trace_csv(csv, "<rewritten>.csv");
  EPS_FUZZ_CHECK(again.ok() && same_trace(*again, *trace), csv);
  // As JSON with the smallest E that holds every id and K distinct experts.
  std::int32_t max_id = -1;
  for (const auto& ids : trace->ranks) {
    for (const std::int32_t id : ids) max_id = std::max(max_id, id);
  }
  RoutingTrace with_e = *trace;
  with_e.num_experts = std::max(max_id + 1, trace->top_k);
  if (with_e.num_experts > (1 << 20)) return;
  const std::string json = eps::data::trace_to_json(with_e);
  const eps::Result<RoutingTrace> as_json = eps::data::parse_trace_json(json, "<rewritten>.json");
  EPS_FUZZ_CHECK(as_json.ok() && same_trace(*as_json, with_e),
                 json + (as_json.ok() ? "" : " " + as_json.status().message()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = eps::fuzz::text_of(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    check_json(text);
  } else {
    check_csv(text);
  }
  return 0;
}
