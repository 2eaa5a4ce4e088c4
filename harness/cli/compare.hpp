// `epsuite compare BASE.json NEW.json [--threshold 10%] [--alpha 0.05] [--force] [--allow-unmatched]`: the
// regression gate of docs/results.md 9.2 (results/regression_gate.hpp) on two results files, without MPI.
// Prints the comparison report to stdout and returns the exit code: 0 no regression and no failed check in
// NEW, 1 a regression, a failed check, or no case matched (without --allow-unmatched), 2 bad input
// (unreadable, truncated or foreign file, future schema_version, empty results, a bad option) or different
// fingerprints without --force, with one "epsuite: error: ..." line on stderr.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class CompareCommand {
 public:
  void bind(CLI::App& app);
  int run() const;

 private:
  std::string base_path_;
  std::string new_path_;
  std::string threshold_ = "10%";
  std::string alpha_ = "0.05";
  bool force_ = false;
  bool allow_unmatched_ = false;
};

}  // namespace eps
