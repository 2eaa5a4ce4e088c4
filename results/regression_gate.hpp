// The regression gate of docs/results.md 9.2 (`epsuite compare`): two results documents (docs/results.md 9.1)
// judged case by case.
//
// Cases are matched by `case_key`, the whole case identity of docs/results.md 9.3: op, transport, mode,
// dtype, every size (sorted by name), then every identity entry (sorted by name), e.g.
// "dispatch/direct/ll/bf16 hidden=256 tokens=128 chaos=off fabric=shm seed=1 signal=fabric-order ...". Cases
// whose identities differ in anything (direct over shm versus direct over libfabric:shm) are never compared.
// A case's median is the nearest-rank p50 of its repetition times (the `stats.p50` of results/document.hpp).
// ratio = new median / base median ("worse" = a larger time). A case
//   regresses  when ratio > 1 + threshold and the two-sided Mann–Whitney U p-value < alpha;
//   improves   when ratio < 1 - threshold and p < alpha;
//   is unchanged otherwise.
// `exit_code` is 1 when any case regresses, any case of NEW has check.passed == false, or no case matched at
// all (docs/results.md 9.2: a gate that compared nothing is not a pass) unless `allow_unmatched`; else 0.
// Cases present in only one document are listed and do not fail the gate by themselves. When no case
// matched, the report names the identity fields (op, transport, mode, dtype, every size and every identity
// entry) whose values differ between the documents: `identity_differences`, one per field whose set of
// values over BASE's cases is not the set over NEW's (a case without the field counts as "(none)").
//
// Oversubscription (docs/results.md 9.5): the report warns, per document, how many matched cases ran
// oversubscribed there (their times measure the scheduler, not the transport), with the document's note; it
// does not change the verdict.
//
// The test is the two-sided Mann–Whitney U of results/statistics.hpp.
//
// Errors (kInvalidArgument, exit 2): documents with different platform fingerprints unless `force`
// ("fingerprints differ: ... use --force"), an empty results list, a duplicate case key, a case with no
// repetitions, a threshold outside [0, 10] or alpha outside (0, 1].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "results/document.hpp"
#include "results/statistics.hpp"

namespace eps {

std::string case_key(const CaseResult& c);

// "10%" -> 0.10, "0.1" -> 0.1; kInvalidArgument naming `field` otherwise.
Result<double> parse_fraction(std::string_view text, std::string_view field);

struct GateOptions {
  double threshold = 0.10;
  double alpha = 0.05;
  bool force = false;            // compare even when the fingerprints differ
  bool allow_unmatched = false;  // zero matched cases pass (otherwise exit 1)
};

enum class Verdict { kUnchanged, kImprovement, kRegression };

struct CaseComparison {
  std::string key;
  double base_median = 0;
  double new_median = 0;
  double ratio = 1;
  MannWhitney test;
  Verdict verdict = Verdict::kUnchanged;
};

// One identity field whose values differ between the documents: its sorted distinct values in each.
struct IdentityDifference {
  std::string field;  // "op", "transport", "mode", "dtype", a size name or an identity entry name
  std::vector<std::string> base_values;
  std::vector<std::string> new_values;
};

struct GateResult {
  std::string base_fingerprint;
  std::string new_fingerprint;
  std::vector<CaseComparison> cases;  // in the order of NEW
  std::vector<std::string> only_in_base;
  std::vector<std::string> only_in_new;
  std::vector<std::string> failed_checks;                // keys of NEW cases with check.passed == false
  std::vector<IdentityDifference> identity_differences;  // by field name
  // Matched cases that ran oversubscribed in BASE and in NEW, and each document's `oversubscribed.note`.
  std::size_t oversubscribed_in_base = 0;
  std::size_t oversubscribed_in_new = 0;
  std::string base_oversubscribed_note;
  std::string new_oversubscribed_note;
  bool allow_unmatched = false;  // GateOptions::allow_unmatched
  std::size_t count(Verdict verdict) const;
  // No case matched and that is not allowed.
  bool nothing_matched() const { return cases.empty() && !allow_unmatched; }
  int exit_code() const;
};

Result<GateResult> run_regression_gate(const ResultsDocument& base, const ResultsDocument& next,
                                       const GateOptions& options);

// The report printed by `epsuite compare`: the regressions, the improvements, the unchanged count, the
// unmatched cases, failed checks and a one-line verdict.
std::string regression_gate_report(const GateResult& comparison, const GateOptions& options);

}  // namespace eps
