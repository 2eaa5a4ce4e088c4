#include "harness/cli/plot.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "harness/plot/plot.hpp"

namespace eps {

void PlotCommand::bind(CLI::App& app) {
  app.add_option("files", files_,
                 "Results JSON documents (docs/results.md 9.1) of epsuite bench or epsuite run")
      ->required();
  app.add_option("--out", out_, "Directory for the PNG/SVG figures and plots.json (created)")->required();
  app.footer(
      "Figures: algo bandwidth against tokens per transport (one per op/mode/dtype), LL p50 latency against "
      "tokens, and per-platform grouped bars per op (platform = tags, else fingerprint prefix). Needs "
      "python3 "
      "with matplotlib. Exit codes: 0 drawn, 2 bad input, 3 python3/matplotlib missing.");
}

int PlotCommand::run() const {
  const Status status = plot_results(files_, out_);
  if (status.ok()) return 0;
  std::fprintf(stderr, "epsuite: error: %s\n", status.message().c_str());
  return status.exit_code();
}

}  // namespace eps
