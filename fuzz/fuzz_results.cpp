// Results documents (docs/results.md 9.1) as `epsuite compare` and `epsuite plot` read them
// (read_results_file = this JSON parse + parse_results; plot additionally refuses an empty results list), and
// the regression gate of docs/results.md 9.2 on them. Properties: a rejected document is bad input naming a
// field; every accepted case the writer can write (case_to_json) reads back to the same case; a document
// compared with itself has no regression and no improvement, and its exit code comes from failed checks only.
#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "results/document.hpp"
#include "results/regression_gate.hpp"

namespace {

bool same_case(const eps::CaseResult& a, const eps::CaseResult& b) {
  return a.op == b.op && a.transport == b.transport && a.mode == b.mode && a.dtype == b.dtype &&
         a.sizes == b.sizes && a.identity == b.identity && a.times_us == b.times_us &&
         a.algo_bytes == b.algo_bytes && a.physical_bytes == b.physical_bytes &&
         a.slowest_rank == b.slowest_rank && a.check == b.check;
}

void check_round_trip(const eps::ResultsDocument& doc) {
  eps::Json results = eps::Json::array();
  std::vector<const eps::CaseResult*> written;
  for (const eps::CaseRecord& record : doc.cases) {
    const eps::Result<eps::Json> json = eps::case_to_json(record.result);
    if (!json.ok()) continue;  // e.g. no repetitions: the writer refuses what the reader tolerates
    results.push_back(*json);
    written.push_back(&record.result);
  }
  const eps::Json document = {{"schema_version", eps::kResultsSchemaVersion},
                              {"suite_version", doc.header.suite_version},
                              {"git_sha", doc.header.git_sha},
                              {"start_time", doc.header.start_time},
                              {"argv", doc.header.argv},
                              {"platform", doc.header.platform},
                              {"config", doc.header.config},
                              {"results", results}};
  const eps::Result<eps::ResultsDocument> reread = eps::parse_results(document, "<rewritten>");
  EPS_FUZZ_CHECK(reread.ok(), "the writer's document is rejected: " + reread.status().message());
  EPS_FUZZ_CHECK(reread->cases.size() == written.size(), "case count changed");
  for (std::size_t i = 0; i < written.size(); ++i) {
    EPS_FUZZ_CHECK(same_case(reread->cases[i].result, *written[i]), fmt::format("case {} changed", i));
  }
}

void check_self_comparison(const eps::ResultsDocument& doc) {
  const eps::GateOptions options;
  const eps::Result<eps::GateResult> comparison = eps::run_regression_gate(doc, doc, options);
  if (!comparison.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(comparison.status()), comparison.status().message());
    return;
  }
  EPS_FUZZ_CHECK(comparison->count(eps::Verdict::kRegression) == 0, "a document regresses against itself");
  EPS_FUZZ_CHECK(comparison->count(eps::Verdict::kImprovement) == 0, "a document improves on itself");
  EPS_FUZZ_CHECK(comparison->only_in_base.empty() && comparison->only_in_new.empty(), "unmatched cases");
  EPS_FUZZ_CHECK(comparison->exit_code() == (comparison->failed_checks.empty() ? 0 : 1), "exit code");
  EPS_FUZZ_CHECK(!eps::regression_gate_report(*comparison, options).empty(), "empty report");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Json input = eps::fuzz::parse_json(eps::fuzz::text_of(data, size));
  if (input.is_discarded()) return 0;
  const eps::Result<eps::ResultsDocument> doc = eps::parse_results(input, "<fuzz>");
  if (!doc.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(doc.status()), doc.status().message());
    return 0;
  }
  check_round_trip(*doc);
  check_self_comparison(*doc);
  return 0;
}
