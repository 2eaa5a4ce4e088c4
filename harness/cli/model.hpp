// `epsuite model --from RESULTS... [--validate RESULTS...] --preset P --ep 8,16,...,1024 [--ranks-per-node N]
// [--cpus-per-node C]
// [--json FILE] [--plot DIR] [--max-error F]`: the performance model of docs/model.md 16
// (perf/model/model.hpp). No MPI: a plain process.
//
// Reads every --from and --validate file (read_results_file: a bad file is exit 2 naming it), fits (on --from
// only) the link models and the
// operation cost lines, validates them on the rank counts they were not fitted on, predicts every fitted
// series at every --ep size of the preset, prints '#' tables (links, operations, validation, predictions),
// writes the kind-model document to --json (atomically) and draws its figures into --plot
// (harness/plot/epsuite_model_plot.py).
//
// Exit codes (docs/errors.md 10): 0; 1 when --max-error F > 0 and a validation point that ran with CPU share
// 1 has |predicted/measured - 1| > F, or no such point exists (oversubscribed points are reported, not
// judged: docs/model.md 16.5); 2 bad input: an unreadable or foreign file, results of different
// platforms without --allow-mixed, nothing to fit, a bad flag (nothing is written); 3 python3/matplotlib
// missing for --plot.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class Params;

class ModelCommand {
 public:
  ModelCommand();
  ~ModelCommand();
  void bind(CLI::App& app);
  int run(const std::vector<std::string>& argv) const;

 private:
  std::unique_ptr<Params> params_;
  std::vector<std::string> from_;
  std::vector<std::string> validate_;
};

}  // namespace eps
