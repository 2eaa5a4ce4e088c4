// `epsuite run --preset NAME --out DIR` (README's main job, issue 6): under mpirun, one command gives
// a new cluster its three answers in DIR:
//   [1/4] platform     info.json (SPEC 9.1 platform block, the resolved preset)
//   [2/4] conformance  the `epsuite check` suite in-process on every rank, conformance.xml (rank 0)
//   [3/4] bench        dispatch, combine and roundtrip in HT and LL mode over every selected transport and
//                      the preset's token sweep, checked bit-exactly (-c): bench-<op>-<mode>.json
//   [4/4] report       plots/ (epsuite plot: PNG, SVG, plots.json) and report.md
// Progress lines are printed by rank 0. Exit code (SPEC 10): the largest of the steps' codes (0 all
// passed, 1 a conformance failure or wrong bench result, 2 bad input, 3 environment).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/params.hpp"

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
