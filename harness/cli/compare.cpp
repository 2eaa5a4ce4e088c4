#include "harness/cli/compare.hpp"

#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "results/regression_gate.hpp"

namespace eps {

void CompareCommand::bind(CLI::App& app) {
  app.add_option("BASE", base_path_, "Baseline results JSON (docs/results.md 9.1)")->required();
  app.add_option("NEW", new_path_, "Results JSON to judge against BASE")->required();
  app.add_option("--threshold", threshold_, "Median slowdown that counts as a regression, e.g. 10% or 0.1")
      ->capture_default_str();
  app.add_option("--alpha", alpha_, "Significance level of the two-sided Mann-Whitney U test")
      ->capture_default_str();
  app.add_flag("--force", force_, "Compare even when the platform fingerprints differ");
  app.add_flag(
      "--allow-unmatched", allow_unmatched_,
      "Pass when no case of NEW matches one of BASE (by default a gate that compared nothing fails)");
  app.footer(
      "A case regresses when its median time is larger by more than the threshold AND p < alpha "
      "(docs/results.md 9.2). "
      "Exit 0: no regression and no failed check in NEW; 1: a regression, a failed check, or no case matched "
      "(the report names the identity fields that differ; --allow-unmatched passes it); 2: bad input or "
      "different fingerprints without --force.");
}

int CompareCommand::run() const {
  const auto compared = [&]() -> Result<GateResult> {
    GateOptions options;
    EPS_ASSIGN_OR_RETURN(options.threshold, parse_fraction(threshold_, "--threshold"));
    EPS_ASSIGN_OR_RETURN(options.alpha, parse_fraction(alpha_, "--alpha"));
    options.force = force_;
    options.allow_unmatched = allow_unmatched_;
    EPS_ASSIGN_OR_RETURN(ResultsDocument base, read_results_file(base_path_));
    EPS_ASSIGN_OR_RETURN(ResultsDocument next, read_results_file(new_path_));
    EPS_ASSIGN_OR_RETURN(GateResult comparison, run_regression_gate(base, next, options));
    fmt::print("{}", regression_gate_report(comparison, options));
    return comparison;
  }();
  std::fflush(stdout);
  if (!compared.ok()) {
    std::fprintf(stderr, "epsuite: error: %s\n", compared.status().message().c_str());
    return compared.status().exit_code();
  }
  return compared->exit_code();
}

}  // namespace eps
