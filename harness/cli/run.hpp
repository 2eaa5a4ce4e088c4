// `epsuite run --preset NAME --out DIR` (README's main job): under mpirun, one command gives a new cluster
// its three answers in DIR, and prints only numbered steps with one summary line each, plus problems in full:
//   [1/4] platform     info.json (docs/results.md 9.1 platform block, the resolved preset)
//   [2/4] conformance  the `epsuite check` suites in-process on every rank: conformance.xml, counts
//   [3/4] bench        dispatch, combine and roundtrip in HT and LL mode over every selected transport and
//                      the preset's token sweep, checked bit-exactly (-c): bench-<op>-<mode>.json; one line
//                      per op and mode naming the fastest transport and its speed-up over `mpi`
//   [4/4] report       plots/ (PNG, SVG, plots.json) and report.md
// Everything else (the configuration block, capability table, GoogleTest output, bench tables, plot script
// output) goes to DIR/logs/<step>.log; --verbose also prints each log after its step. DIR must be new or
// empty; --force replaces an earlier run directory (one holding info.json), so old files never enter the
// report. Rank 0 prints. Exit code (docs/errors.md 10): the largest of the steps' codes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impls/runtime/params.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class RunCommand {
 public:
  RunCommand();
  void bind(CLI::App& app);
  // After parsing: initializes MPI, runs the four steps, finalizes; returns the exit code agreed over ranks.
  int run(const std::vector<std::string>& argv);

 private:
  std::unique_ptr<Params> params_;
  std::vector<std::string> tags_;
};

}  // namespace eps
